"""The federation wire: one batch of changes a peer POSTs to ``/v1/federation/changes`` and
the per-change answer (docs/federation.md). One typed definition each; the outbound side
(the shared outbox, next) sends exactly these.

Each change names who made it (``origin``, a cortex id, with its ``revision`` of the object),
the object by its id at its ``home`` cortex (where it was first stored), and the agent that
signed it (``author``, ``signed_at``, ``signature``, and ``key_fingerprint``, the reference to
the signer's public key in the origin's published keyring). ``seq`` numbers the changes a
sender sends this receiver, strictly increasing; ``correlation_id`` is a UUIDv4 the sender
draws per change and keeps across its retries.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attested_cortex.service.resources.commands import Json, Tag, Text

_WIRE = ConfigDict(extra="forbid", frozen=True)
CortexId = str
ChangeKind = Literal["memory.store", "memory.update", "memory.delete", "link.create",
                     "link.invalidate"]
Status = Literal["stored", "updated", "deleted", "linked", "invalidated", "duplicate",
                 "expired", "own", "superseded", "refused", "quarantined", "retry"]
_CORTEX = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class FederatedMemory(BaseModel):
    """The memory's state after the change (store and update)."""

    model_config = _WIRE
    namespace: str = Field(min_length=1, max_length=512)
    title: Text = Field("", max_length=512)
    content: Text
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    metadata: Json = Field(default_factory=dict)


class FederatedLink(BaseModel):
    """A link between two federated memories, each named by its home cortex and its id
    there (``link.create``); ``link.invalidate`` reads ``valid_until`` only."""

    model_config = _WIRE
    src_home: CortexId = _CORTEX
    src_id: uuid.UUID
    dst_home: CortexId = _CORTEX
    dst_id: uuid.UUID
    relation: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_\-]+$")
    valid_from: int = Field(0, ge=0)
    valid_until: int | None = Field(None, ge=0)


class FederatedChange(BaseModel):
    """One change of one object, signed by the agent that made it."""

    model_config = _WIRE
    correlation_id: uuid.UUID
    seq: int = Field(ge=1)
    origin: CortexId = _CORTEX
    revision: int = Field(ge=1)
    kind: ChangeKind
    home: CortexId = _CORTEX
    object_id: uuid.UUID
    author: str = Field(min_length=1, max_length=200)
    signed_at: int = Field(ge=0)
    signature: str | None = Field(None, max_length=200)
    key_fingerprint: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    #: Who signed: ``agent`` (the author, with a key of the origin's keyring) or
    #: ``origin`` (the origin cortex's identity key: deletes and invalidations of objects
    #: homed there, which the local API takes unsigned; ADR 0138).
    signer: Literal["agent", "origin"] = "agent"
    #: Unix ms after which the receiver drops the change (the sender's clock; seed 000 K6).
    expires_at: int = Field(ge=0)
    memory: FederatedMemory | None = None
    link: FederatedLink | None = None

    @field_validator("correlation_id")
    @classmethod
    def _v4(cls, value: uuid.UUID) -> uuid.UUID:
        if value.version != 4:
            raise ValueError("correlation_id must be a UUIDv4")
        return value


class ChangeBatch(BaseModel):
    """``POST /v1/federation/changes``: changes in the sender's order."""

    model_config = _WIRE
    changes: list[FederatedChange] = Field(min_length=1, max_length=10_000)


class ChangeResult(BaseModel):
    """The receiver's answer for one change, given after its commit (the ACK)."""

    model_config = _WIRE
    correlation_id: uuid.UUID
    seq: int
    #: Whether the sender is done with the change (False: ``retry`` it later).
    accepted: bool
    status: Status
    reason: str | None = None
    memory_id: str | None = None
    link_id: str | None = None
    #: ``peer_attested`` and the origin it names, for a change stored here.
    provenance: dict[str, Any] | None = None
    quarantine_id: int | None = None


class BatchResult(BaseModel):
    """The answer to a batch: one result per change, in order."""

    model_config = _WIRE
    cortex: CortexId
    results: list[ChangeResult]


class QuarantinedChange(BaseModel):
    """A change held apart: unsigned, or its signature did not verify."""

    model_config = _WIRE
    id: int
    peer: CortexId
    correlation_id: str
    origin: CortexId
    kind: str
    object_id: str
    revision: int
    reason: str
    change: dict[str, Any]
    received_at: str


class QuarantineOut(BaseModel):
    """``GET /v1/federation/quarantine``: held changes, oldest first."""

    model_config = _WIRE
    items: list[QuarantinedChange]
    next: int | None = Field(None, description="pass as `after` for the next page")


class QuarantineQuery(BaseModel):
    """Paging of the quarantine."""

    model_config = ConfigDict(extra="forbid")
    after: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=1000)


class PublishedKeyring(BaseModel):
    """``GET /v1/federation/keyring``: this cortex's agents' keys, signed by its identity."""

    model_config = _WIRE
    cortex: CortexId
    issued_at: int
    agents: list[dict[str, Any]]
    signature: str


class ProvenanceOut(BaseModel):
    """``GET /v1/memories/{id}/provenance``."""

    model_config = _WIRE
    memory_id: str
    federated: bool
    attest_level: Literal["peer_attested"] | None = None
    origin: CortexId | None = None
    revision: int | None = None
    home: CortexId | None = None
    object_id: str | None = None
    signed_by: str | None = None
    key_fingerprint: str | None = None
    peer: CortexId | None = None
    deleted: bool | None = None
