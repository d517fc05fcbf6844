"""MemoryCortex: one memory server deployment with its database, as spec and status models.

Read by the renderer (``kinds``) to produce the CRD and, later, by the operator's builders
to turn a cortex into a StatefulSet, a Deployment, Services and Secrets.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints

from attested_cortex.crd.backups import BackupStatus, RestoreStatus
from attested_cortex.crd.cloudnativepg import CloudNativePGDatabase
from attested_cortex.crd.common import (
    STORAGE_SIZE_PATTERN,
    CommonStatus,
    CrdModel,
    ResourceRequirements,
    SecretKeyReference,
    StorageSpec,
    section,
)
from attested_cortex.crd.federation import FEDERATION_RULES, FederationSpec
from attested_cortex.crd.logicalbackups import (
    RESTORE_ALONE,
    RESTORE_IMMUTABLE,
    BackupSection,
    LogicalBackupStatus,
    RestoreSection,
)
from attested_cortex.crd.permissionrule import namespace_pattern_extra
from attested_cortex.crd.settings import (
    AuditSpec,
    DatabaseTimeouts,
    EmbeddingSpec,
    LimitsSpec,
    SpokeMemorySpec,
)
from attested_cortex.crd.tls import ServerTlsSpec
from attested_cortex.crd.witnesses import AuditStatus
from attested_cortex.policy.scopes import BASES
from attested_cortex.policy.tiers import CALLER_TIERS, MARK_PATTERN

TRANSCRIPT_PATTERN_LENGTH = 128

GraphBackend = Literal["Auto", "AGE", "CTE"]
PermissionMode = Literal["Advisory", "Enforce", "Off"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
AuthMode = Literal["Kubernetes", "Tokens"]
DatabaseMode = Literal["Managed", "External", "CloudNativePG"]
WriteDefault = Literal["Allow", "Deny", "AskUser"]
LogLevel = Literal["Debug", "Info", "Warning", "Error"]
RuleLine = Annotated[str, StringConstraints(max_length=2048)]


class ManagedDatabase(CrdModel):
    """A PostgreSQL 17 + Apache AGE StatefulSet run by the operator."""

    storage: StorageSpec = section(StorageSpec, "The data volume.")
    image: str | None = Field(
        default=None,
        description="PostgreSQL+AGE image; the operator's configured default when absent.",
        max_length=512,
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the database container."
    )


class ExternalDatabase(CrdModel):
    """A database the cortex does not run: reached through a connection URI in a Secret."""

    secret_ref: SecretKeyReference = Field(
        description="Secret key holding a postgresql:// connection URI."
    )


class DatabaseSpec(CrdModel):
    """Where the memories live: exactly one of managed, external or cloudNativePG."""

    managed: ManagedDatabase | None = Field(
        default=None, description="Run PostgreSQL+AGE as a StatefulSet next to the server: "
        "one pod, one volume, no replica (development and small teams)."
    )
    external: ExternalDatabase | None = Field(
        default=None, description="Use an existing PostgreSQL database."
    )
    cloud_native_pg: CloudNativePGDatabase | None = Field(
        default=None, alias="cloudNativePG",
        description="Run PostgreSQL+AGE as a CloudNativePG Cluster owned by the cortex: "
        "replicas, automatic failover, synchronous commits (CloudNativePG must be installed).",
    )
    timeouts: DatabaseTimeouts = section(
        DatabaseTimeouts, "Bounds on the server's waits inside the database (every mode).")


class GraphSpec(CrdModel):
    """The knowledge-graph engine."""

    backend: GraphBackend = Field(
        default="Auto",
        description="Auto uses Apache AGE when the database has it and recursive CTEs "
        "otherwise; AGE requires it; CTE never uses it.",
    )


class ServiceSpec(CrdModel):
    """The Service in front of the memory server."""

    type: ServiceType = Field(default="ClusterIP", description="Kubernetes Service type.")
    port: int = Field(default=8080, ge=1, le=65535, description="Service port.")


class ServerAuthSpec(CrdModel):
    """How agents authenticate to the memory server."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.mode) || self.mode != 'Tokens' || has(self.tokensSecretRef)",
        "message": "auth mode Tokens needs tokensSecretRef",
    }]})

    mode: AuthMode = Field(
        default="Kubernetes",
        description="Kubernetes: service-account tokens reviewed by the API server "
        "(TokenReview), agent ids from AgentIdentity serviceAccountRef; Tokens: bearer "
        "tokens from a Secret.",
    )
    tokens_secret_ref: SecretKeyReference | None = Field(
        default=None,
        description="Tokens mode: the Secret key holding the token hash file.",
    )


class ServerSpec(CrdModel):
    """The memory server Deployment."""

    replicas: int = Field(default=1, ge=0, le=20, description="Number of server pods (0 to 20).")
    image: str | None = Field(
        default=None,
        description="Cortex image; the operator's configured default when absent.",
        max_length=512,
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the server container."
    )
    service: ServiceSpec = section(ServiceSpec, "The Service in front of the server.")
    auth: ServerAuthSpec = section(ServerAuthSpec, "How agents authenticate.")
    log_level: LogLevel = Field(
        default="Info",
        description="Least severe server log records written: Debug, Info, Warning or Error.",
    )
    tls: ServerTlsSpec | None = Field(
        default=None,
        description="Serve HTTPS: exactly one of selfSigned, secretRef or certManager; plain "
        "HTTP when absent.",
    )


class PermissionsSpec(CrdModel):
    """How PermissionRules are applied."""

    mode: PermissionMode = Field(
        default="Advisory",
        description="Advisory logs decisions without blocking; Enforce blocks on Deny and "
        "holds AskUser for approval; Off bypasses the rules.",
    )
    write_default: WriteDefault = Field(
        default="Allow",
        description="What a write gets when no PermissionRule matches it (reads are always "
        "allowed): Allow, Deny (deny-first: only what a rule allows is written) or AskUser "
        "(held for approval; needs approval.enabled).",
    )


class ApprovalSpec(CrdModel):
    """The approval API for AskUser decisions."""

    enabled: bool = Field(default=True, description="Serve the approval API.")
    timeout_seconds: int = Field(
        default=3600,
        ge=1,
        le=604800,
        description="Seconds a held operation waits for a decision before it is denied.",
    )
    hmac_secret_ref: SecretKeyReference | None = Field(
        default=None,
        description="Secret key holding the HMAC key that signs decisions; the operator "
        "generates one when absent.",
    )
    max_held_per_agent: int = Field(
        default=100, ge=1, le=10000,
        description="Operations one agent may have waiting for a decision at once; past it "
        "the next is refused with 429 (1 to 10000).",
    )
    max_held_bytes_per_agent: int = Field(
        default=4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024,
        description="Bytes of requests one agent's waiting operations may hold; past it the "
        "next is refused with 429 (1024 to 268435456).",
    )
    retention_seconds: int = Field(
        default=7 * 86400, ge=60, le=366 * 86400,
        description="Seconds decided and expired approvals are kept before they are deleted "
        "(60 to 31622400).",
    )


class TranscriptNamespace(CrdModel):
    """One memory-namespace pattern where transcripts are accepted."""

    namespace: str = Field(
        description="Memory-namespace pattern: '/'-separated segments of [a-z0-9._-], '*' for "
        "one level and '**' for any depth, e.g. support/** or team/*/chats.",
        min_length=1,
        # Shorter than a PermissionRule's: the API server prices the CEL checks of every list
        # item by its longest string, and 16 x 512 characters is over its budget.
        max_length=TRANSCRIPT_PATTERN_LENGTH,
        json_schema_extra=namespace_pattern_extra(),
    )
    retention_days: int | None = Field(
        default=None, ge=1, le=36500,
        description="Days to keep this namespace's transcripts; the cortex-wide retentionDays "
        "when absent.",
    )


class TranscriptsSpec(CrdModel):
    """Storage of the agent transcripts memories come from."""

    enabled: bool = Field(default=False, description="Accept and store transcripts.")
    retention_days: int | None = Field(
        default=None, ge=1, le=36500, description="Days to keep transcripts; forever when absent."
    )
    namespaces: list[TranscriptNamespace] = Field(
        default_factory=list,
        max_length=16,
        description="Memory namespaces where transcripts are accepted, first match wins; every "
        "namespace when empty. Elsewhere a transcript is refused (403).",
    )
    prune_after_days: int = Field(
        default=7, ge=0, le=36500,
        description="Days an archived transcript (past its retention) stays replayable before "
        "its text is pruned.",
    )
    max_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=64 * 1024 * 1024,
        description="Largest transcript in UTF-8 bytes; larger is refused with 413 (1024 to "
        "67108864).",
    )


class QuotasSpec(CrdModel):
    """Per-agent limits; an AgentIdentity's spec.quotas overrides them for its agent."""

    enabled: bool = Field(
        default=True,
        description="Enforce the request rate (false: no rate limit; the storage quota still "
        "applies).",
    )
    requests_per_second: int = Field(
        default=100, ge=1, le=100000, description="Requests per second per agent."
    )
    storage_per_agent: str = Field(
        default="100Mi",
        description="Memory content stored per agent, a quantity such as 100Mi.",
        max_length=32,
        pattern=STORAGE_SIZE_PATTERN,
    )


CeilingMark = Annotated[str, StringConstraints(pattern=MARK_PATTERN, max_length=530)]
TierMarks = Annotated[dict[str, CeilingMark], Field(max_length=len(BASES))]
_TIER_LIST = ", ".join(f"'{t}'" for t in CALLER_TIERS)
_BASE_LIST = ", ".join(f"'{b}'" for b in sorted(BASES))


class TrustSpec(CrdModel):
    """Trust tiers and their scope ceilings (ADR 0049)."""

    default_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] = Field(
        default="Trusted",
        description="The tier of a credential that names none (an AgentIdentity without "
        "trustTier, a tokens-file line without tier=).",
    )
    ceilings: dict[str, TierMarks] = Field(
        default_factory=dict,
        description="Per-tier marks merged over the defaults (docs/adr/0049): tier "
        "(Trusted, SemiTrusted, Untrusted) -> scope base -> granted, denied, qualified "
        "(only a qualified held scope passes) or qualified:<namespace pattern> (only held "
        "scopes inside it pass). Kernel, the server's own tier, cannot be tuned.",
        max_length=3,
        json_schema_extra={"x-kubernetes-validations": [
            {"rule": f"self.all(t, t in [{_TIER_LIST}])",
             "message": "ceilings are keyed by tier: Trusted, SemiTrusted or Untrusted"},
            {"rule": f"self.all(t, self[t].all(s, s in [{_BASE_LIST}]))",
             "message": f"a ceiling marks scope bases: {', '.join(sorted(BASES))}"},
        ]},
    )


SealedNamespace = Annotated[str, Field(
    min_length=1,
    # As a transcript namespace's: the API server prices the CEL checks of every list item
    # by its longest string.
    max_length=TRANSCRIPT_PATTERN_LENGTH,
    description="Memory-namespace pattern: '/'-separated segments of [a-z0-9._-], '*' for one "
    "level and '**' for any depth, e.g. medical/** or team/*/private.",
    json_schema_extra=namespace_pattern_extra(),
)]


class EncryptionSpec(CrdModel):
    """Encryption at rest under the cortex's master key (ADR 0056)."""

    at_rest: bool | None = Field(
        default=None,
        description="Seal memories' title, content and metadata (their full-text index "
        "keyed), transcript frames and held requests with ChaCha20-Poly1305 under the "
        "master key (the <cortex>-master-key Secret). Unset: the cortex decides once, at its "
        "first start, and keeps the answer in its database: on when the database holds no "
        "plain memory or transcript (a new cortex), off when it holds plain data from "
        "before (ADR 0079). Turned on, rows written before are sealed in the background; "
        "turned off, sealed rows stay sealed and readable. Back up the master-key Secret "
        "with the database: without it sealed rows cannot be read.",
    )
    sealed_namespaces: list[SealedNamespace] = Field(
        default_factory=list,
        max_length=16,
        description="Memory-namespace patterns whose memories keep no vector (an embedding "
        "reveals meaning): the embedder and the backfill skip them, a client vector is refused "
        "(400 vector_in_sealed_namespace) and recall there is full text only (over keyed blind "
        "tokens with atRest). A pattern added later drops the vectors already stored there.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class SchemaSpec(CrdModel):
    """The database schema version."""

    target_version: int | None = Field(
        default=None,
        ge=1,
        description="Schema version to migrate to; the newest this build knows when absent.",
    )


class MemoryCortexSpec(CrdModel):
    """Desired state of a MemoryCortex."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.permissions) || !has(self.permissions.writeDefault) || "
                "self.permissions.writeDefault != 'AskUser' || !has(self.approval) || "
                "!has(self.approval.enabled) || self.approval.enabled",
        "message": "permissions.writeDefault AskUser needs approval.enabled: without the "
                   "approval API every write no rule matches would be refused",
    }, RESTORE_IMMUTABLE, RESTORE_ALONE, *FEDERATION_RULES]})

    database: DatabaseSpec = Field(
        description="The database: exactly one of managed, external or cloudNativePG.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "[has(self.managed), has(self.external), has(self.cloudNativePG)]"
                            ".filter(x, x).size() == 1",
                    "message": "set exactly one of database.managed, database.external or "
                               "database.cloudNativePG",
                }
            ]
        },
    )
    graph: GraphSpec = section(GraphSpec, "The knowledge-graph engine.")
    server: ServerSpec = section(ServerSpec, "The memory server Deployment.")
    permissions: PermissionsSpec = section(PermissionsSpec, "How PermissionRules apply.")
    approval: ApprovalSpec = section(ApprovalSpec, "The approval API for AskUser decisions.")
    transcripts: TranscriptsSpec = section(TranscriptsSpec, "Transcript storage.")
    quotas: QuotasSpec = section(QuotasSpec, "Per-agent limits.")
    embedding: EmbeddingSpec = section(EmbeddingSpec, "Where recall's vectors come from.")
    limits: LimitsSpec = section(LimitsSpec, "Bounds on requests and answers.")
    spoke_memory: SpokeMemorySpec = section(SpokeMemorySpec, "The spoke-memory family.")
    audit: AuditSpec = section(AuditSpec, "The signed audit chain.")
    trust: TrustSpec = section(TrustSpec, "Trust tiers and their scope ceilings.")
    encryption: EncryptionSpec = section(EncryptionSpec, "Encryption at rest.")
    backup: BackupSection = section(BackupSection, "Scheduled backups to an object store "
                                    "(every database mode).")
    restore: RestoreSection | None = Field(
        default=None,
        description="Make this new cortex from a logical backup (immutable; absent: an empty "
        "cortex). A CloudNativePG physical restore is database.cloudNativePG.bootstrap.")
    schema_: SchemaSpec = Field(
        default_factory=SchemaSpec,
        alias="schema",
        description="The database schema version.",
        json_schema_extra={"default": {}},
    )
    federation: FederationSpec | None = Field(
        default=None, description="Federation with peer cortexes over mTLS (issue 42): "
        "inbound changes verified against each peer's published keyring, stored with "
        "peer_attested provenance or quarantined.")
    paused: bool = Field(
        default=False, description="Stop reconciling; running pods are left as they are."
    )


class MemoryCortexStatus(CommonStatus):
    """Observed state of a MemoryCortex (conditions Ready, DatabaseReady, SchemaReady,
    ServerReady)."""

    schema_version: int | None = Field(
        default=None, ge=0, description="Schema version the database is at."
    )
    kg_backend: Literal["age", "cte"] | None = Field(
        default=None, description="Graph backend the server uses: age or cte."
    )
    endpoint: str | None = Field(
        default=None, description="In-cluster URL of the memory server.", max_length=1024
    )
    database_mode: DatabaseMode | None = Field(
        default=None, description="Which database the cortex uses: Managed, External or "
        "CloudNativePG."
    )
    primary: str | None = Field(
        default=None,
        description="The pod of the database's current primary (CloudNativePG's "
        "currentPrimary; the StatefulSet pod in Managed mode).",
        max_length=253,
    )
    connection_secret: str | None = Field(
        default=None,
        description="Name of the Secret holding the database connection URI.",
        max_length=253,
    )
    rule_summary: list[RuleLine] | None = Field(
        default=None,
        description="The PermissionRules in force, one line each, in evaluation order.",
        max_length=1000,
    )
    hook_count: int | None = Field(
        default=None, ge=0, description="Hooks rendered into the server's hook file."
    )
    identities: int | None = Field(
        default=None, ge=0, description="AgentIdentities whose public keys the server trusts."
    )
    logical_backup: LogicalBackupStatus | None = Field(
        default=None, description="Where spec.backup.logical's runs stand: the last success "
        "and the last failure.")
    backup: BackupStatus | None = Field(
        default=None, description="Where the cortex's backups stand (spec.database."
        "cloudNativePG.backup).")
    audit: AuditStatus | None = Field(
        default=None, description="Where the operator-run witnesses of the audit "
        "checkpoints stand (spec.audit.witnesses[].run; condition AuditWitnessed).")
    restore: RestoreStatus | None = Field(
        default=None, description="What the verification of this restored cortex checked "
        "(condition DataVerified).")
