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
from attested_cortex.crd.witnesses import AuditWitness

EmbeddingMode = Literal["MiniLM", "Static", "Default", "Onnx", "None", "Client", "Endpoint"]
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
    {"rule": "(has(self.mode) && self.mode == 'Onnx') == has(self.onnx)",
     "message": "embedding mode Onnx needs onnx (the model's files and their SHA-256), and "
                "onnx is only used with mode Onnx"},
    {"rule": "!has(self.mode) || self.mode != 'Client' || (has(self.model) && "
             "has(self.dimension))",
     "message": "embedding mode Client needs model and dimension: the vectors agents send "
                "must say which model made them and how long they are"},
]


SHA256: Final = r"^[0-9a-fA-F]{64}$"


class OnnxModelSpec(CrdModel):
    """A sentence embedder of your own, offline (docs/adr/0098): an ONNX export and its
    tokenizer.json, from an image or a PersistentVolumeClaim, pinned by SHA-256."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.image) != has(self.claimName)",
        "message": "embedding.onnx needs exactly one of image (an OCI image holding the files) "
                   "and claimName (a PersistentVolumeClaim holding them)",
    }]})

    image: str | None = Field(
        default=None, min_length=1, max_length=1024,
        description="An OCI image whose files hold the model, mounted read-only as an image "
        "volume (the cluster's ImageVolume feature, beta since Kubernetes 1.33).",
    )
    claim_name: str | None = Field(
        default=None, min_length=1, max_length=253,
        description="A PersistentVolumeClaim in the cortex's namespace holding the model, "
        "mounted read-only.",
    )
    path: str = Field(
        default="", max_length=1024, pattern=r"^([^/.][^/]*(/[^/.][^/]*)*)?$",
        description="The directory of the files inside the image or volume (relative).",
    )
    model_file: str = Field(default="model.onnx", min_length=1, max_length=255,
                            pattern=r"^[^/]+$", description="The ONNX file's name.")
    tokenizer_file: str = Field(default="tokenizer.json", min_length=1, max_length=255,
                                pattern=r"^[^/]+$", description="The tokenizer.json's name.")
    model_sha256: str = Field(min_length=64, max_length=64, pattern=SHA256,
                              description="SHA-256 of the ONNX file (hex); another file "
                              "stops the server.")
    tokenizer_sha256: str = Field(min_length=64, max_length=64, pattern=SHA256,
                                  description="SHA-256 of tokenizer.json (hex).")
    pooling: Literal["Mean", "CLS"] = Field(
        default="Mean", description="Mean: the attention-masked mean of the last layer "
        "(MiniLM, mpnet, e5); CLS: the first token's vector (bge).")
    normalize: bool = Field(default=True, description="L2-normalise each vector.")
    max_tokens: int = Field(default=128, ge=8, le=8192,
                            description="The model's window in word pieces; longer memories "
                            "are embedded in overlapping passages.")


class EmbeddingSpec(CrdModel):
    """Where recall's vectors come from."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": EMBEDDING_RULES})

    mode: EmbeddingMode = Field(
        default="MiniLM",
        description="MiniLM (the default for new cortexes): all-MiniLM-L6-v2 embedded in the "
        "server image (384 dimensions; long memories in passages); Static: the small static "
        "model embedded beside it (256 dimensions, fastest to write, weaker on paraphrases); "
        "Default: Static's name before MiniLM became the default (stored in cortexes created "
        "before, which keep it until changed); Onnx: a model of your own (onnx); None: no "
        "vectors, full-text recall only; Client: agents send vectors (model and dimension say "
        "which); Endpoint: an OpenAI-compatible embeddings endpoint at url.",
    )
    url: str | None = Field(
        default=None, max_length=2048, pattern=r"^https?://[^\s]+$",
        description="Endpoint mode: the http(s) URL of the embeddings endpoint.",
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Model name: sent to the endpoint (Endpoint), the model agents' vectors "
        "come from (Client), or the name your own model's vectors are recorded under (Onnx; "
        "absent: its file's digest).",
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
    onnx: OnnxModelSpec | None = Field(
        default=None, description="Onnx mode: where your own model's files are and how "
        "its vectors are made.")
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
    max_import_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024,
        description="Most bytes one spoke-memory import may stage; a chunk past it is "
        "refused with 413 import_too_large (1024 to 1073741824).",
    )
    max_staged_bytes_per_agent: int = Field(
        default=256 * 1024 * 1024, ge=1024, le=4 * 1024 * 1024 * 1024,
        description="Most bytes one principal may hold staged over its open imports; past "
        "it 413 (1024 to 4294967296).",
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

    witnesses: list[AuditWitness] = Field(
        default_factory=list, max_length=32,
        description="Witnesses of the audit tree's signed checkpoints (issue 40): with url, "
        "a C2SP witness the server offers each checkpoint to (ADR 0101: its cosignatures are "
        "served with the checkpoint, a refusal counts in "
        "cortex_audit_witness_refusals_total); with run, one the operator runs (ADR 0102: "
        "status.audit.witnesses, condition AuditWitnessed). Needs signer.mode Operator.",
        json_schema_extra={"x-kubernetes-validations": [{
            "rule": "self.all(w, self.exists_one(x, x.name == w.name))",
            "message": "witness names must be unique"}]})

    signer: AuditSignerSpec = section(AuditSignerSpec, "The key the server signs its own "
                                      "records with.")
    record_reads: bool = Field(
        default=True,
        description="Record every successful read (recall, get, list, graph reads) in the "
        "chain as a memory.access statement signed by the audit signer: the operation, the "
        "namespaces, digests of the request and of the returned ids, never memory or query "
        "text. Needs signer.mode Operator; false for read-heavy cortexes.",
    )
