"""MemoryCortex: one memory server deployment with its database, as spec and status models.

Read by the renderer (``kinds``) to produce the CRD and, later, by the operator's builders
to turn a cortex into a StatefulSet, a Deployment, Services and Secrets.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, JsonValue, StringConstraints

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
from attested_cortex.crd.permissionrule import namespace_pattern_extra

TRANSCRIPT_PATTERN_LENGTH = 128

GraphBackend = Literal["Auto", "AGE", "CTE"]
PermissionMode = Literal["Advisory", "Enforce", "Off"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
AuthMode = Literal["Kubernetes", "Tokens"]
DatabaseMode = Literal["Managed", "External", "CloudNativePG"]
EmbeddingMode = Literal["Default", "None", "Client", "Endpoint"]
WriteDefault = Literal["Allow", "Deny", "AskUser"]
LogLevel = Literal["Debug", "Info", "Warning", "Error"]
SignerMode = Literal["Operator", "Off"]
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


class DatabaseTimeouts(CrdModel):
    """How long the server waits inside the database before it gives up on a request."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.lockMs) || !has(self.statementMs) || self.lockMs <= self.statementMs",
        "message": "database.timeouts.lockMs must not exceed statementMs: a lock wait is part "
                   "of a statement",
    }]})

    lock_ms: int = Field(
        default=5000, ge=10, le=600_000,
        description="Milliseconds a request waits for a row lock before it is answered 409 "
        "(10 to 600000).",
    )
    statement_ms: int = Field(
        default=30_000, ge=100, le=3_600_000,
        description="Milliseconds one SQL statement may run before it is cancelled and the "
        "request answered 503 (100 to 3600000).",
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


class ApiKeyReference(CrdModel):
    """A key inside a Secret in the same namespace holding a bearer token."""

    name: str = Field(description="Name of the Secret.", min_length=1, max_length=253)
    key: str = Field(
        default="apiKey", description="Key inside the Secret.", min_length=1, max_length=253
    )


EMBEDDING_RULES: Final[list[JsonValue]] = [
    {"rule": "!has(self.mode) || self.mode != 'Endpoint' || has(self.url)",
     "message": "embedding mode Endpoint needs url: the http(s) URL of an OpenAI-compatible "
                "embeddings endpoint"},
    {"rule": "!has(self.url) || (has(self.mode) && self.mode == 'Endpoint')",
     "message": "embedding url is only used with mode Endpoint"},
    {"rule": "!has(self.apiKeySecretRef) || (has(self.mode) && self.mode == 'Endpoint')",
     "message": "embedding apiKeySecretRef is only used with mode Endpoint"},
    {"rule": "!has(self.mode) || self.mode != 'Client' || (has(self.model) && "
             "has(self.dimension))",
     "message": "embedding mode Client needs model and dimension: the vectors agents send "
                "must say which model made them and how long they are"},
]


class EmbeddingSpec(CrdModel):
    """Where recall's vectors come from."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": EMBEDDING_RULES})

    mode: EmbeddingMode = Field(
        default="Default",
        description="Default: the small model embedded in the server image; None: no vectors, "
        "full-text recall only; Client: agents send vectors (model and dimension say which); "
        "Endpoint: an OpenAI-compatible embeddings endpoint at url.",
    )
    url: str | None = Field(
        default=None, max_length=2048, pattern=r"^https?://[^\s]+$",
        description="Endpoint mode: the http(s) URL of the embeddings endpoint.",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Model name: sent to the endpoint (Endpoint), or the model agents' vectors "
        "come from (Client).",
    )
    dimension: int | None = Field(
        default=None, ge=1, le=16000,
        description="Length of the vectors (1 to 16000); Endpoint mode learns it from the "
        "first answer when absent.",
    )
    api_key_secret_ref: ApiKeyReference | None = Field(
        default=None,
        description="Endpoint mode: the Secret key holding the endpoint's bearer token; "
        "mounted into the server as a file, never copied into the configuration.",
    )
    timeout_ms: int = Field(
        default=1000, ge=10, le=5000,
        description="Milliseconds one embedding call may take (10 to 5000, within a write's "
        "deadline); past it the memory is stored and embedded later.",
    )


LIMITS_RULES: Final[list[JsonValue]] = [
    {"rule": "!has(self.maxContentChars) || !has(self.maxBodyBytes) || "
             "self.maxContentChars <= self.maxBodyBytes",
     "message": "limits.maxContentChars must not exceed limits.maxBodyBytes: content longer "
                "than the largest body could never be stored"},
]


class LimitsSpec(CrdModel):
    """Bounds on what one request may carry and one answer may hold."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": LIMITS_RULES})

    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=64 * 1024 * 1024,
        description="Largest request body in bytes; larger is refused with 413 (1024 to "
        "67108864).",
    )
    max_content_chars: int = Field(
        default=256 * 1024, ge=1, le=16 * 1024 * 1024,
        description="Longest memory content in characters (1 to 16777216).",
    )
    max_metadata_bytes: int = Field(
        default=16 * 1024, ge=2, le=1024 * 1024,
        description="Largest memory metadata, as JSON bytes (2 to 1048576).",
    )
    recall_pool: int = Field(
        default=200, ge=10, le=10_000,
        description="Candidates recall ranks before it returns the best (10 to 10000).",
    )
    body_read_timeout_seconds: int = Field(
        default=30, ge=1, le=3600,
        description="Seconds a client may take to send its request body (1 to 3600).",
    )
    max_answer_bytes: int = Field(
        default=4 * 1024 * 1024, ge=64 * 1024, le=256 * 1024 * 1024,
        description="Largest answer in bytes; a listing or recall stops short of it and says "
        "so (65536 to 268435456).",
    )


class AuditSignerSpec(CrdModel):
    """Who signs the server's own audit records."""

    mode: SignerMode = Field(
        default="Operator",
        description="Operator: the operator generates an Ed25519 key once into the Secret "
        "<cortex>-audit-signer (never regenerated while it exists) and the server signs policy "
        "decisions and sweeper records with it as agent cortex:<namespace>/<cortex>; Off: "
        "those records are not chained.",
    )


class AuditSpec(CrdModel):
    """The signed audit chain."""

    signer: AuditSignerSpec = section(AuditSignerSpec, "The key the server signs its own "
                                      "records with.")


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
        "message": "permissions.writeDefault AskUser needs approval.enabled: a held write "
                   "would wait for a decision nobody can make",
    }]})

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
    audit: AuditSpec = section(AuditSpec, "The signed audit chain.")
    schema_: SchemaSpec = Field(
        default_factory=SchemaSpec,
        alias="schema",
        description="The database schema version.",
        json_schema_extra={"default": {}},
    )
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
