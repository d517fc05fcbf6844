"""``ServerSettings``: everything ``cortexctl serve`` is configured with.

Read from an optional YAML file (``--config``; the operator renders it into a ConfigMap)
and overridden by command-line flags. Unknown keys are errors, so a typo never silently
falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from attested_cortex.embedding.onnx import OnnxModel
from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.patterns import parse_pattern
from attested_cortex.policy.tiers import MARK_PATTERN


class RuleSettings(BaseModel):
    """One permission rule as the operator compiles it from a PermissionRule.

    ``source`` names the PermissionRule (``<namespace>/<name>``) so decisions and the rule
    summary can say which object decided. Evaluation belongs to the permissions work.
    """

    model_config = ConfigDict(extra="forbid")
    source: str = Field(min_length=1, max_length=512)
    namespace: str = Field(min_length=1, max_length=512)
    agents: list[str] = Field(min_length=1, max_length=256)
    operations: list[str] = Field(min_length=1, max_length=16)
    decision: Literal["allow", "deny", "ask_user"]
    inherit: bool = True
    priority: int = Field(0, ge=-1000, le=1000)
    reason: str | None = Field(None, max_length=1024)


class PermissionsSettings(BaseModel):
    """Permission evaluation: the mode and the ordered rules (highest priority first)."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["advisory", "enforce", "off"] = "advisory"
    rules: list[RuleSettings] = Field(default_factory=list, max_length=10_000)
    #: What a write gets when no rule matches (reads always get allow); see ADR 0009.
    write_default: Literal["allow", "deny", "ask_user"] = "allow"


#: ``<namespace>/<service account name>``: a DNS label, then a DNS subdomain.
SERVICE_ACCOUNT_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"


class AgentMapping(BaseModel):
    """``--auth kubernetes``: a service account (``<namespace>/<name>``) acting as an agent."""

    model_config = ConfigDict(extra="forbid")
    service_account: str = Field(pattern=SERVICE_ACCOUNT_PATTERN)
    agent_id: str = Field(min_length=1, max_length=253)
    #: Scopes of the agent (``memory.read:team/**`` ...); None: every scope except
    #: ``memory.override``.
    scopes: list[str] | None = Field(None, max_length=64)
    #: The agent's trust tier (ADR 0049); None: ``trust.default_tier``.
    trust_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] | None = None


class TrustSettings(BaseModel):
    """Trust tiers (ADR 0049): the tier of a credential naming none, and per-tier marks
    merged over the defaults of :mod:`attested_cortex.policy.tiers` (tier -> scope -> mark)."""

    model_config = ConfigDict(extra="forbid")
    default_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] = "Trusted"
    ceilings: dict[Literal["Trusted", "SemiTrusted", "Untrusted"],
                   dict[str, Annotated[str, Field(pattern=MARK_PATTERN)]]] = Field(
        default_factory=dict)


class ApprovalSettings(BaseModel):
    """The approval API for AskUser decisions; disabled without an HMAC secret file."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    timeout_seconds: int = Field(3600, ge=1, le=604800)
    hmac_secret_file: Path | None = None
    #: How often overdue actions are expired and remembered rules refreshed.
    sweep_interval_seconds: float = Field(5.0, ge=0.05, le=300)
    #: How many actions one agent may have waiting at once (past it: 429).
    max_held_per_agent: int = Field(100, ge=1, le=10000)
    #: How many bytes of requests one agent's waiting actions may hold (past it: 429).
    max_held_bytes_per_agent: int = Field(4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    #: How long decided and expired actions are kept before the sweeper deletes them.
    retention_seconds: int = Field(7 * 86400, ge=60, le=366 * 86400)


class TranscriptNamespaceSettings(BaseModel):
    """Transcripts accepted in namespaces matching ``namespace`` (``*``/``**`` patterns)."""

    model_config = ConfigDict(extra="forbid")
    namespace: str = Field(min_length=1, max_length=512)
    retention_days: int | None = Field(None, ge=1, le=36500)


class TranscriptsSettings(BaseModel):
    """Transcript storage (docs/transcripts.md): off by default; where on, for how long."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    #: The retention of every namespace without its own (None: forever).
    retention_days: int | None = Field(None, ge=1, le=36500)
    #: Where transcripts are accepted, first match wins; empty: every namespace.
    namespaces: list[TranscriptNamespaceSettings] = Field(default_factory=list,
                                                          max_length=1000)
    #: Days an archived transcript stays replayable before its bytes are pruned.
    prune_after_days: int = Field(7, ge=0, le=36500)
    #: Largest transcript, in UTF-8 bytes (an imported frame may not inflate past it).
    max_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    sweep_interval_seconds: float = Field(60.0, ge=0.05, le=86400)


class AgentQuotaSettings(BaseModel):
    """One agent's quota overrides."""

    model_config = ConfigDict(extra="forbid")
    agent_id: str = Field(min_length=1, max_length=253)
    requests_per_second: int | None = Field(None, ge=1, le=100_000)
    storage_bytes: int | None = Field(None, ge=1)


class QuotasSettings(BaseModel):
    """Per-agent limits (defaults of the MemoryCortex spec)."""

    model_config = ConfigDict(extra="forbid")
    requests_per_second: int = Field(100, ge=1, le=100_000)
    storage_per_agent_bytes: int = Field(100 * 1024 * 1024, ge=1)
    enabled: bool = True
    per_agent: list[AgentQuotaSettings] = Field(default_factory=list, max_length=10_000)


class LimitsSettings(BaseModel):
    """Overrides of :class:`attested_cortex.service.pipeline.limits.Limits`."""

    model_config = ConfigDict(extra="forbid")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    max_content_chars: int = Field(256 * 1024, ge=1, le=16 * 1024 * 1024)
    max_metadata_bytes: int = Field(16 * 1024, ge=2, le=1024 * 1024)
    recall_pool: int = Field(200, ge=10, le=10_000)
    body_read_timeout_s: int = Field(30, ge=1, le=3600)
    max_answer_bytes: int = Field(4 * 1024 * 1024, ge=64 * 1024, le=256 * 1024 * 1024)
    max_import_bytes: int = Field(64 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    max_staged_bytes_per_agent: int = Field(256 * 1024 * 1024, ge=1024,
                                            le=4 * 1024 * 1024 * 1024)


class OnnxSettings(BaseModel):
    """A sentence embedder of the user's own (``embedder: onnx``, docs/adr/0098): an ONNX
    export and its ``tokenizer.json`` in ``dir`` (a volume or an image), both pinned."""

    model_config = ConfigDict(extra="forbid")
    dir: Path
    model_file: str = Field("model.onnx", min_length=1, max_length=255, pattern=r"^[^/]+$")
    tokenizer_file: str = Field("tokenizer.json", min_length=1, max_length=255,
                                pattern=r"^[^/]+$")
    model_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    tokenizer_sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    #: mean: the attention-masked mean of the last layer (sentence-transformers' MiniLM,
    #: mpnet, e5); cls: its first token's vector (bge)
    pooling: Literal["mean", "cls"] = "mean"
    normalize: bool = True
    max_tokens: int = Field(128, ge=8, le=8192)  # the model's window, in word pieces
    overlap: int = Field(32, ge=0, le=4095)  # pieces consecutive passages share

    @model_validator(mode="after")
    def _overlap_below_half(self) -> OnnxSettings:
        if self.overlap >= self.max_tokens // 2:
            raise ValueError("embedding.onnx.overlap must be below half of max_tokens")
        return self

    def spec(self, name: str | None) -> OnnxModel:
        """The loader's view; vectors are recorded under ``name`` (``embedding.model``), or
        under the model file's digest when none is given."""
        return OnnxModel(name or f"onnx/{self.model_sha256.lower()[:16]}",
                         self.dir / self.model_file, self.dir / self.tokenizer_file,
                         self.model_sha256, self.tokenizer_sha256, pooling=self.pooling,
                         normalize=self.normalize, max_tokens=self.max_tokens,
                         overlap=self.overlap)


class EmbeddingSettings(BaseModel):
    """How memories and queries are embedded (the source itself is ``embedder``)."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(None, min_length=1, max_length=200,
                              description="model name (client vectors; sent to an endpoint)")
    dimension: int | None = Field(None, ge=1, le=16000)
    api_key_file: Path | None = None  # a bearer token for the endpoint, read once
    timeout_ms: int = Field(1000, ge=10, le=5000)  # within the write class deadline
    backfill_batch: int = Field(64, ge=1, le=1024)
    backfill_pause_ms: int = Field(50, ge=0, le=60_000)
    min_similarity: float = Field(0.0, ge=-1.0, le=1.0)
    # 50: the quality set lost nothing against 100, and HNSW search costs about linear in it
    vector_pool: int = Field(50, ge=10, le=1000)
    # memories waiting for the write-behind embedder; 0 embeds inline after each write
    write_queue: int = Field(4096, ge=0, le=1_000_000)
    onnx: OnnxSettings | None = None  # embedder: onnx


class ReflectionSettings(BaseModel):
    """The spoke-memory family's optional OpenAI-compatible reflection engine (ADR 0069):
    generation answers a ``pending`` receipt that a background worker resolves."""

    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(min_length=8, max_length=2048, pattern=r"^https?://",
                          description="base URL; /chat/completions is appended")
    model: str = Field(min_length=1, max_length=200)
    api_key_file: Path | None = None  # a bearer token for the endpoint, read once
    timeout_ms: int = Field(30_000, ge=100, le=300_000)  # one call, connect included
    max_tokens: int = Field(512, ge=16, le=8192)


class SpokeMemorySettings(BaseModel):
    """The spoke-memory family (issue 28)."""

    model_config = ConfigDict(extra="forbid")
    #: None: the deterministic extractive engine, generation commits at once.
    reflection: ReflectionSettings | None = None
    #: An export of more records than this answers ``pending`` and is built in the background.
    export_pending_records: int = Field(5000, ge=0, le=100_000_000)
    #: How often an idle pending-receipt worker looks for work another server left.
    pending_poll_ms: int = Field(1000, ge=10, le=60_000)


class CheckpointSettings(BaseModel):
    """Signed checkpoints of the audit tree (issue 40, ADR 0099), cut by the audit signer."""

    model_config = ConfigDict(extra="forbid")

    #: Cut one once this many events were appended since the last...
    every_events: int = Field(1000, ge=1, le=10_000_000)
    #: ...or once this many seconds passed with any event appended since.
    every_seconds: float = Field(10.0, ge=0.05, le=86_400)
    #: The log's origin (and its key's name); absent: ``attested-cortex/<audit_signer>``.
    origin: str | None = Field(None, min_length=1, max_length=255, pattern=r"^[^\s+]+$")


class WitnessSettings(BaseModel):
    """A c2sp.org/tlog-witness the server offers each new checkpoint to (ADR 0101)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=r"^[^\s+]+$")
    url: str = Field(min_length=8, max_length=2048, pattern=r"^https?://")


class AuditSettings(BaseModel):
    """What the audit records beyond writes, and its checkpoints."""

    model_config = ConfigDict(extra="forbid")

    witnesses: list[WitnessSettings] = Field(default_factory=list, max_length=32)

    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    #: Every successful read appends a ``memory.access`` statement (digests only) signed by
    #: the audit signer; off for read-heavy cortexes that accept not knowing who read what.
    record_reads: bool = True


class TlsSettings(BaseModel):
    """HTTPS (ADR 0047): a certificate pair in PEM files, reloaded when they change."""

    model_config = ConfigDict(extra="forbid")
    cert_file: Path  # the server certificate, then its chain
    key_file: Path
    min_version: Literal["1.2", "1.3"] = "1.2"
    #: How often the files are looked at for a renewed certificate.
    reload_interval_seconds: float = Field(10.0, ge=0.05, le=3600)


class MasterKeySettings(BaseModel):
    """The cortex's master key (ADR 0050): exactly one of ``dir`` (the operator's mounted
    ``<cortex>-master-key`` Secret: ``current`` and ``v<N>`` files), ``file`` (one key,
    ``--master-key-file``) or ``passphrase_file`` (Argon2id with ``salt``, standalone)."""

    model_config = ConfigDict(extra="forbid")
    dir: Path | None = None
    file: Path | None = None
    passphrase_file: Path | None = None
    #: 32 hex characters (16 bytes), fixed for the installation: the passphrase's salt.
    salt: str | None = Field(None, pattern=r"^[0-9a-fA-F]{32}$")
    #: Argon2id cost; the defaults are seed 003's (m = 64 MiB, t = 3, p = 4).
    argon2_iterations: int = Field(3, ge=1, le=100)
    argon2_memory_kib: int = Field(64 * 1024, ge=8 * 1024, le=4 * 1024 * 1024)
    argon2_lanes: int = Field(4, ge=1, le=64)
    #: How often a ring directory (``dir``) is polled for a rotated Secret (ADR 0066).
    reload_interval_ms: int = Field(5000, ge=100, le=3_600_000)

    @model_validator(mode="after")
    def _one_source(self) -> MasterKeySettings:
        given = [n for n in ("dir", "file", "passphrase_file") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of dir, file, passphrase_file")
        if self.passphrase_file is not None and self.salt is None:
            raise ValueError("passphrase_file needs salt (32 hex characters, e.g. from "
                             "`python3 -c 'import secrets; print(secrets.token_hex(16))'`)")
        return self


class EncryptionSettings(BaseModel):
    """Encryption at rest (ADR 0056, ADR 0065): transcript frames, held requests and memories
    sealed under the master key's subkeys. Needs ``master_key``; the server refuses to start
    with it on and no key."""

    model_config = ConfigDict(extra="forbid")
    #: None (unset): the cortex's own default, decided once at the first start with a master
    #: key and kept in its database (ADR 0079): on for a database holding no plain memory or
    #: transcript (a new cortex), off for one holding plain data from before; off without a
    #: master key.
    at_rest: bool | None = None
    #: Namespace patterns (``*`` one level, ``**`` any depth, as in rules and scope
    #: qualifiers) whose memories get no vector and are recalled by full text only (ADR 0057
    #: item 2); a pattern added later drops the vectors already stored there.
    sealed_namespaces: list[str] = Field(default_factory=list, max_length=64)
    #: The re-sealing worker (rotation): frames per transaction, and the pause between
    #: batches while older versions remain.
    reseal_batch: int = Field(200, ge=1, le=5000)
    reseal_pause_ms: int = Field(50, ge=0, le=60_000)


    @field_validator("sealed_namespaces")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                parse_pattern(pattern)
            except InvalidInputError as exc:
                raise ValueError(exc.message) from None
        return value


class PeerSettings(BaseModel):
    """One federation peer (issue 42, docs/federation.md): who it is, how it is reached and
    trusted, what we send it and what we accept from it, and into which namespace prefix."""

    model_config = ConfigDict(extra="forbid")
    #: The peer's cortex id: its certificate's common name and the ``origin`` of its changes.
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    url: str = Field(min_length=8, max_length=2048, pattern=r"^https://")
    #: The CA bundle (PEM file) that issued the peer's server and client certificates.
    ca_file: Path
    #: The peer's Ed25519 identity key (standard base64 of the raw 32 bytes): it signs the
    #: keyring the peer publishes.
    public_key: str = Field(min_length=44, max_length=44)
    send: list[str] = Field(default_factory=list, max_length=64)
    accept: list[str] = Field(default_factory=list, max_length=64)
    #: Accepted changes land under ``<into>/<their namespace>``; None: their namespace as is.
    into: str | None = Field(None, min_length=1, max_length=256)
    #: The peer acts as agent ``peer:<name>`` with these scopes and this trust tier; None:
    #: ``memory.read``, ``memory.write`` and ``memory.forget``, each qualified by
    #: ``<into>/**`` when ``into`` is set (so a SemiTrusted peer may delete what it sent).
    scopes: list[str] | None = Field(None, max_length=64)
    trust_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] = "SemiTrusted"

    @field_validator("send", "accept")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                parse_pattern(pattern)
            except InvalidInputError as exc:
                raise ValueError(exc.message) from None
        return value


class FederationSettings(BaseModel):
    """Federation between cortexes (issue 42, docs/adr/0121): this cortex's identity (an
    Ed25519 identity directory whose agent id is the cortex id, and a TLS client certificate)
    and its peers. Inbound changes are verified, replay-checked and stored or quarantined."""

    model_config = ConfigDict(extra="forbid")
    identity_dir: Path
    client_cert_file: Path
    client_key_file: Path
    peers: list[PeerSettings] = Field(default_factory=list, max_length=64)
    #: The replay cache of correlation ids (seed 000 K6: 10k entries, 30 s).
    replay_entries: int = Field(10_000, ge=16, le=1_000_000)
    replay_ttl_seconds: float = Field(30.0, ge=1, le=3600)
    #: How long a fetched peer keyring is trusted before it is fetched again.
    keyring_ttl_seconds: float = Field(60.0, ge=1, le=86_400)
    max_changes_per_batch: int = Field(500, ge=1, le=10_000)
    #: Outbound (ADR 0132): changes per batch sent to a peer, the retry schedule (1, 5,
    #: 25 s, then doubling up to the cap), the bound on one request, how long a sent change
    #: stays valid (``expires_at``) and how often an idle sender looks without a NOTIFY.
    send_batch: int = Field(100, ge=1, le=10_000)
    retry_seconds: list[float] = Field(default_factory=lambda: [1.0, 5.0, 25.0],
                                       min_length=1, max_length=10)
    backoff_max_seconds: float = Field(60.0, gt=0, le=3600)
    request_timeout_seconds: float = Field(30.0, gt=0, le=600)
    change_ttl_seconds: float = Field(60.0, ge=1, le=86_400)
    poll_seconds: float = Field(5.0, gt=0, le=600)

    @model_validator(mode="after")
    def _unique_peers(self) -> FederationSettings:
        names = [p.name for p in self.peers]
        if len(set(names)) != len(names):
            raise ValueError("federation.peers: each name at most once")
        return self


class DeclaredSubscription(BaseModel):
    """A subscription declared in configuration (synced into the table at start-up)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=253)
    url: str = Field(min_length=1, max_length=2048)
    events: list[str] = Field(min_length=1, max_length=32)
    namespaces: list[str] = Field(default_factory=lambda: ["**"], max_length=64)
    secret_file: Path
    max_in_flight: int = Field(4, ge=1, le=64)
    enabled: bool = True
    allow_private_targets: bool = False


class SubscriptionsSettings(BaseModel):
    """Webhook delivery from the event outbox (issue 41, ADR 0106/0107)."""

    model_config = ConfigDict(extra="forbid")
    #: Deliver at all (the outbox is written whatever this says, once migrated).
    enabled: bool = True
    #: The first retries' delays (seed 000 K6: 1 s, 5 s, 25 s); after them each delay is
    #: the last times ``retry_factor``, up to ``retry_cap_seconds``.
    retry_schedule_seconds: list[float] = Field(
        default_factory=lambda: [1.0, 5.0, 25.0], min_length=1, max_length=16)
    retry_factor: float = Field(5.0, ge=1.0, le=10.0)
    retry_cap_seconds: float = Field(600.0, ge=0.01, le=86400)
    #: Attempts per event before it goes to the dead-letter queue (1 + retries).
    max_attempts: int = Field(10, ge=1, le=100)
    connect_timeout_ms: int = Field(2000, ge=10, le=60_000)
    total_timeout_ms: int = Field(10_000, ge=10, le=300_000)
    #: How much of a receiver's answer is read (the rest is dropped).
    max_response_bytes: int = Field(4096, ge=0, le=1024 * 1024)
    #: Outbox events read per batch of one subscription.
    batch: int = Field(256, ge=1, le=10_000)
    #: How long the outbox keeps an event; a subscription whose cursor falls behind it
    #: loses the dropped events (status and metrics say so).
    retention_seconds: int = Field(7 * 86400, ge=1, le=366 * 86400)
    #: The cortex-wide SSRF exception (a subscription may also allow itself).
    allow_private_targets: bool = False
    #: Extra ranges refused like private ones (the cluster's pod and service CIDRs).
    refused_cidrs: list[str] = Field(default_factory=list, max_length=64)
    #: Subscriptions kept in the table from configuration (the operator renders the
    #: CortexSubscription resources here; ADR 0108).
    declared: list[DeclaredSubscription] = Field(default_factory=list, max_length=1000)
    #: Where webhooks are delivered from (ADR 0142): ``process``, a child process of the
    #: server at a lower CPU priority, so deliveries never take the write path's CPU first;
    #: ``in_process``, the server's own event loop (ADR 0107, as before).
    delivery: Literal["process", "in_process"] = "process"
    #: The delivery process's niceness (added to the server's): 0 shares the CPU equally.
    delivery_nice: int = Field(10, ge=0, le=19)


class ServerSettings(BaseModel):
    """The server's configuration."""

    model_config = ConfigDict(extra="forbid")

    database_url: str = ""
    listen: list[str] = Field(default_factory=lambda: ["127.0.0.1:8080"])
    auth: Literal["dev", "tokens", "kubernetes"] = "dev"
    #: None: plain HTTP (loopback development, or TLS ended in front of the server).
    tls: TlsSettings | None = None
    tokens_file: Path | None = None
    kubeconfig: Path | None = None  # --auth kubernetes outside a cluster
    token_audiences: list[str] = Field(default_factory=list)
    graph_backend: Literal["Auto", "AGE", "CTE"] = "Auto"
    hooks_file: Path | None = None
    keys_dir: Path | None = None
    #: Agent id of a Cortex-custody identity in ``keys_dir`` that signs policy statements
    #: (would-be denials, refusals, approval decisions) into the audit chain.
    audit_signer: str | None = Field(None, min_length=1, max_length=253)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    #: None: no key hierarchy (nothing is encrypted or keyed under it).
    master_key: MasterKeySettings | None = None
    encryption: EncryptionSettings = Field(default_factory=EncryptionSettings)
    permissions: PermissionsSettings = Field(default_factory=PermissionsSettings)
    agents: list[AgentMapping] = Field(default_factory=list, max_length=10_000)
    trust: TrustSettings = Field(default_factory=TrustSettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    transcripts: TranscriptsSettings = Field(default_factory=TranscriptsSettings)
    quotas: QuotasSettings = Field(default_factory=QuotasSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    # minilm since docs/adr/0097 (a setting that names "default" keeps the static model)
    embedder: str = Field("minilm", min_length=1, max_length=2048,
                          description="minilm | static | default (static's old name) | onnx | "
                          "none | client | an http(s) URL")
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    spoke_memory: SpokeMemorySettings = Field(default_factory=SpokeMemorySettings)
    #: None: no federation (issue 42).
    federation: FederationSettings | None = None
    subscriptions: SubscriptionsSettings = Field(default_factory=SubscriptionsSettings)
    log_level: str = "INFO"
    pool_max_size: int = Field(10, ge=1, le=200)
    # Every wait in the database is bounded: on a lock (409), on a statement (503) and on a
    # write's commit, a synchronous replica's confirmation included (503, ADR 0090).
    db_lock_timeout_ms: int = Field(5000, ge=10, le=600_000)
    db_statement_timeout_ms: int = Field(30_000, ge=100, le=3_600_000)
    db_write_timeout_ms: int = Field(10_000, ge=100, le=3_600_000)
    # How long a request waits for an unreachable database (a failover, a restart) before
    # its 503 with Retry-After (ADR 0126); 0: at once. At most 80 % of the write deadline.
    db_reconnect_wait_ms: int = Field(8000, ge=0, le=600_000)


def load_settings(path: Path | None, overrides: dict[str, Any]) -> ServerSettings:
    """Settings from ``path`` (if any) with ``overrides`` (non-None flags) applied."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InvalidInputError(f"cannot read config {path}: {exc}", field="config") from exc
        if not isinstance(loaded, dict):
            raise InvalidInputError(f"config {path} must be a YAML mapping", field="config")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ServerSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidInputError(f"config: {where}: {err['msg']}", field=where) from exc


def split_listen(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 in brackets) as a pair; a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not host or not 0 < int(port) < 65536:
        raise InvalidInputError(f"--listen {address!r} must be HOST:PORT", field="listen")
    return host.strip("[]"), int(port)
