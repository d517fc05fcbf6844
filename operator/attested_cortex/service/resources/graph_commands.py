"""Inputs of the link and knowledge-graph operations (request bodies of /v1/links and
/v1/kg/*). Ids and instants are parsed from their JSON strings (instants normalised to UTC,
within years 1..9999); everything else is strict.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

Id = Annotated[uuid.UUID, Field(strict=False, description="UUID")]


def _in_utc_range(moment: datetime) -> datetime:
    """Refuse an instant whose UTC form falls outside years 1..9999: stored, it could not be
    read back (``9999-12-31T23:59:59-12:00`` is in year 10000 in UTC)."""
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the instant falls outside years 0001..9999 in UTC") from exc


Instant = Annotated[AwareDatetime, Field(strict=False, description="RFC 3339 with offset"),
                    AfterValidator(_in_utc_range)]
Relation = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_\-]+$")]


class CreateLink(BaseModel):
    """``POST /v1/links``."""

    model_config = _STRICT

    src_id: Id
    dst_id: Id
    relation: Relation = Field(description="related_to, supersedes, contradicts, "
                               "derived_from, or a custom x-<name>")
    valid_from: Instant | None = None
    valid_until: Instant | None = None
    signature: str | None = Field(
        None, max_length=200,
        description="Agent custody: base64 Ed25519 signature over the canonical CBOR payload",
    )
    id: Id | None = Field(None, description="Client-chosen link id (a used id is refused)")


class InvalidateLink(BaseModel):
    """``POST /v1/kg/invalidate``."""

    model_config = _STRICT

    link_id: Id
    valid_until: Instant | None = None


class KgQuery(BaseModel):
    """``POST /v1/kg/query``."""

    model_config = _STRICT

    start_id: Id
    depth: int = Field(2, ge=1, le=5)
    relations: list[Relation] | None = Field(None, max_length=32)
    valid_at: Instant | None = None


class KgPaths(BaseModel):
    """``POST /v1/kg/paths``."""

    model_config = _STRICT

    src_id: Id
    dst_id: Id
    max_depth: int = Field(4, ge=1, le=7)
    limit: int = Field(100, ge=1, le=1000)
    valid_at: Instant | None = None
