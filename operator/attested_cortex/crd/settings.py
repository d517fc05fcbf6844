"""The MemoryCortex sections that tune the server: embedding, limits, database timeouts and
the audit signer, with the CEL rules that catch their contradictions at admission.

Each field mirrors a :class:`attested_cortex.server.settings.ServerSettings` field with the
server's bounds and default (a builder test compares the defaults); ``builders/settings.py``
renders them. Imported by :mod:`.memorycortex`. Pure data.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, JsonValue

from attested_cortex.crd.common import CrdModel, section

EmbeddingMode = Literal["Default", "MiniLM", "None", "Client", "Endpoint"]
SignerMode = Literal["Operator", "Off"]


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
    write_ms: int = Field(
        default=10_000, ge=100, le=3_600_000,
        description="Milliseconds a write's database work may take, its commit and a "
        "synchronous replica's confirmation included, before it is cancelled and answered "
        "503 commit_unconfirmed with Retry-After (100 to 3600000). Such a write may have "
        "committed on the primary: sent again with its Idempotency-Key it is answered once, "
        "once a replica has it.",
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
        description="Default: the small static model embedded in the server image (256 "
        "dimensions); MiniLM: all-MiniLM-L6-v2 embedded beside it (384 dimensions, better on "
        "paraphrases, slower to embed); None: no vectors, "
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
        description="Milliseconds one embedding call may take (10 to 5000); a late one leaves "
        "the memory without a vector until the backfill embeds it.",
    )


class ReflectionSpec(CrdModel):
    """An OpenAI-compatible chat-completions endpoint that generates the spoke-memory
    family's reflections (ADR 0069): generation answers a pending receipt that the server's
    background worker resolves."""

    url: str = Field(
        max_length=2048, pattern=r"^https?://[^\s]+$",
        description="The http(s) base URL of the endpoint (/chat/completions is appended).",
    )
    model: str = Field(min_length=1, max_length=200, description="Model name sent to it.")
    api_key_secret_ref: ApiKeyReference | None = Field(
        default=None,
        description="The Secret key holding the endpoint's bearer token; mounted into the "
        "server as a file, never copied into the configuration.",
    )
    timeout_ms: int = Field(
        default=30_000, ge=100, le=300_000,
        description="Milliseconds one generation call may take (100 to 300000); a late one "
        "fails its receipt with generator_timeout.",
    )
    max_tokens: int = Field(
        default=512, ge=16, le=8192, description="Largest answer asked for, in tokens.")


class SpokeMemorySpec(CrdModel):
    """The spoke-memory family served at /v1/spoke/memory."""

    reflection: ReflectionSpec | None = Field(
        default=None,
        description="Absent: reflections use the deterministic extractive engine and commit "
        "at once.",
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
