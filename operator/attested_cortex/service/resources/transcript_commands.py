"""Inputs of the two transcript operations: ``POST /v1/transcripts`` and
``GET /v1/memories/{id}/replay``. Pydantic models validated once at the edge, so an HTTP
route or an MCP tool (one registry entry each) wraps :func:`.transcripts.store_transcript`
and :func:`.transcripts.replay` with the same checks. Called by the routes and the service.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from attested_cortex.service.resources.commands import NAMESPACE_SCHEMA, Json, Text, check_namespace

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class StoreTranscript(BaseModel):
    """``POST /v1/transcripts``: a conversation or reasoning trail, as text or as one zstd
    frame (base64) made elsewhere. Exactly one of ``content`` and ``frame``."""

    model_config = _STRICT

    namespace: str = Field(description="`/`-separated path; transcripts must be enabled there",
                           json_schema_extra=NAMESPACE_SCHEMA)
    content: Text | None = Field(None, description="The transcript text (stored zstd-compressed)")
    frame: str | None = Field(
        None, max_length=16 * 1024 * 1024,
        description="Base64 of one zstd frame of UTF-8 text (inflated within the size limit)")
    metadata: Json = Field(default_factory=dict, description="Free-form JSON object")

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str) -> str:
        return check_namespace(value)

    @field_validator("frame")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError("frame must be standard base64") from exc
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.content is None) == (self.frame is None):
            raise ValueError("send exactly one of content and frame")
        return self

    def frame_bytes(self) -> bytes | None:
        """The imported frame, decoded (validated above)."""
        return None if self.frame is None else base64.b64decode(self.frame, validate=True)


class ReplayMemory(BaseModel):
    """``GET /v1/memories/{id}/replay``: the spans a memory cites, or (``full``) the whole of
    every transcript it cites."""

    model_config = _STRICT

    memory_id: Annotated[uuid.UUID, Field(strict=False, description="The memory's id")]
    full: bool = Field(False, description="Return each cited transcript whole, not its spans")
