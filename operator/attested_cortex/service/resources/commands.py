"""The inputs of each operation, validated once at the edge.

These pydantic models are the request bodies of the HTTP API (and so its OpenAPI
schemas) and what the service pipelines accept. Unknown fields, wrong types, NUL bytes
(PostgreSQL cannot store them) and out-of-range sizes are rejected here, before anything
is written. Sizes that are merely too large raise 413 (see :func:`check_sizes`).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, field_validator

from attested_cortex.errors import TooLargeError
from attested_cortex.namespaces import PATTERN, namespace_problem
from attested_cortex.service.pipeline.limits import Limits
from attested_cortex.service.resources.graph_commands import Instant

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

Tag = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f]+$")]

#: A client-supplied vector (``--embedder client``): finite numbers, at most pgvector's 16000.
Vector = Annotated[
    list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=1, max_length=16000)
]


def _no_nul(value: Any, path: str = "") -> None:
    """Reject NUL characters anywhere in a JSON value (keys included)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"text{' at ' + path if path else ''} must not contain NUL (\\u0000)")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, path)
            _no_nul(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_nul(item, f"{path}[{index}]")


def _without_nul(value: Any) -> Any:
    _no_nul(value)
    return value


#: Text and JSON that PostgreSQL can store: no NUL anywhere (keys included).
Text = Annotated[str, AfterValidator(_without_nul)]
Json = Annotated[dict[str, Any], AfterValidator(_without_nul)]


#: How a namespace field is documented in the API's schemas (validated by check_namespace).
NAMESPACE_SCHEMA: dict[str, JsonValue] = {"pattern": PATTERN, "maxLength": 512}


def check_namespace(value: str) -> str:
    """A validator body: the namespace, or ValueError naming the problem."""
    problem = namespace_problem(value)
    if problem is not None:
        raise ValueError(f"namespace {problem}")
    return value


#: Offsets are characters of the transcript text; bounded so a huge number is a clear 400.
MAX_OFFSET = 2**31 - 1


class Cite(BaseModel):
    """One span of a transcript a memory comes from: ``[start, end)`` in Unicode code
    points (not UTF-16 code units: docs/transcripts.md gives the conversion)."""

    model_config = _STRICT

    transcript_id: Annotated[uuid.UUID, Field(strict=False, description="UUID")]
    start: int = Field(ge=0, le=MAX_OFFSET, description="First cited code point (from 0; "
                       "not a UTF-16 offset)")
    end: int = Field(ge=1, le=MAX_OFFSET, description="One past the last cited code point")


_SIGNATURE = ("Agent custody: base64 Ed25519 signature over the canonical CBOR of the "
              "memory after the write (docs/attestation.md, signed memory writes)")
_SIGNED_AT = "The moment in the signed payload (within 5 minutes of the server's clock)"


class StoreMemory(BaseModel):
    """``POST /v1/memories``: a new memory."""

    model_config = _STRICT

    namespace: str = Field(description="`/`-separated path, at most 512 characters / 8 levels",
                           json_schema_extra=NAMESPACE_SCHEMA)
    content: Text = Field(description="The memory text (searchable)")
    title: Text = Field("", max_length=512, description="A short title (searchable, ranks higher)")
    tags: list[Tag] = Field(default_factory=list, max_length=64, description="At most 64 tags")
    metadata: Json = Field(default_factory=dict, description="Free-form JSON object")
    signature: str | None = Field(None, max_length=200, description=_SIGNATURE)
    signed_at: Instant | None = Field(None, description=_SIGNED_AT)
    embedding: Vector | None = Field(
        None, description="The memory's vector, only with --embedder client (its dimension)"
    )
    citations: list[Cite] = Field(
        default_factory=list, max_length=64,
        description="Spans of the caller's transcripts this memory comes from "
        "(`GET /v1/memories/{id}/replay` returns them)")

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str) -> str:
        return check_namespace(value)


#: The most memories one ``POST /v1/memories:batch`` stores.
MAX_BATCH = 1000


class StoreMemories(BaseModel):
    """``POST /v1/memories:batch``: up to 1,000 memories, stored all or nothing."""

    model_config = _STRICT

    memories: list[StoreMemory] = Field(
        min_length=1, max_length=MAX_BATCH,
        description="The memories, stored in this order, each as `POST /v1/memories` "
        "stores one (its hooks fire for each; a refusal of any stores none and names its "
        "`index`)")


class UpdateMemory(BaseModel):
    """``PATCH /v1/memories/{id}``: the fields to change; omitted fields stay."""

    model_config = _STRICT

    content: Text | None = Field(None, description="New text")
    title: Text | None = Field(None, max_length=512, description="New title")
    tags: list[Tag] | None = Field(None, max_length=64, description="New tags (replace)")
    metadata: Json | None = Field(None, description="New metadata (replace)")
    expected_revision: int | None = Field(
        None, ge=1, description="Refuse with 409 unless the memory is at this revision"
    )
    signature: str | None = Field(None, max_length=200, description=_SIGNATURE)
    signed_at: Instant | None = Field(None, description=_SIGNED_AT)
    embedding: Vector | None = Field(
        None, description="The new text's vector, only with --embedder client"
    )


class RecallQuery(BaseModel):
    """``POST /v1/recall``: a natural-language query."""

    model_config = _STRICT

    query: Text = Field(min_length=1, max_length=2000, description="Search text")
    namespace: str | None = Field(
        None, description="Search this namespace and its ancestors (nearer ranks higher)"
    )
    limit: int = Field(10, ge=1, le=100, description="At most this many results")
    budget_tokens: int | None = Field(
        None, ge=1, le=1_000_000,
        description="Fill results greedily up to this many tokens (about 4 characters each)",
    )
    explain: bool = Field(False, description="Add each result's score parts (`explain`)")
    receipts: bool = Field(False, description="Add `receipts`: for each returned memory the "
                           "inclusion proof of the audit event that last wrote it, against "
                           "one signed checkpoint (ADR 0104)")
    embedding: Vector | None = Field(
        None, description="The query's vector, only with --embedder client"
    )

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str | None) -> str | None:
        return None if value is None else check_namespace(value)


def check_sizes(limits: Limits, *, content: str | None, metadata: dict[str, Any] | None) -> None:
    """Raise 413 when the content or the encoded metadata is over its limit."""
    if content is not None and len(content) > limits.max_content_chars:
        raise TooLargeError(
            f"content is {len(content)} characters; the limit is {limits.max_content_chars}",
            field="content", limit=limits.max_content_chars,
        )
    if metadata is not None:
        size = len(json.dumps(metadata, separators=(",", ":")).encode())
        if size > limits.max_metadata_bytes:
            raise TooLargeError(
                f"metadata is {size} bytes as JSON; the limit is {limits.max_metadata_bytes}",
                field="metadata", limit=limits.max_metadata_bytes,
            )
