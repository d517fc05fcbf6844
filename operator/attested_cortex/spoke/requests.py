"""The request of each ``memory.*`` operation and the answer of each read (mutating ops
answer a :class:`~.models.MemoryReceipt`). Every request but ``memory.describe`` and
``memory.spaces.list`` names its ``space_id``; reads that page take ``cursor``/``limit``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from attested_cortex.attest.receipt_models import ReceiptsOut
from attested_cortex.spoke.models import (
    Capability,
    Content,
    Flag,
    MemoryCandidate,
    MemoryGrant,
    MemorySpace,
    Placement,
    ProfileDocument,
    ProvenanceFilter,
    ReadSelection,
    Reflection,
    RetainedRecord,
    Wire,
    ident_field,
    kind_field,
)

_SPACE = Field(min_length=1, max_length=512)
_LIMIT = Field(default=50, ge=1, le=500)
_RECEIPTS = Field(default=False, description=(
    "Also answer `receipts`: the inclusion proof of the op record that last wrote each "
    "returned record (issue 40, ADR 0104; 404 `no_checkpoints` without an audit signer)"))
_RECEIPTS_OUT = Field(default=None, description=(
    "With `receipts: true`: by record id in `memories`, against one signed checkpoint"))


class Empty(Wire):
    """A request with nothing in it."""


class InSpace(Wire):
    """A request addressed to one space."""

    space_id: str = _SPACE


class Paged(InSpace):
    cursor: str | None = None
    limit: int = _LIMIT


# --- spaces, subjects, grants -------------------------------------------------------------

class DescribeAnswer(Wire):
    protocol_version: str
    served_flags: list[Flag]
    limits: dict[str, int]
    required_profile_kinds: list[str]
    engine_policy_version: str


class SpaceList(Wire):
    spaces: list[MemorySpace]


class SpaceRevision(InSpace):
    """Freeze or unfreeze, compare-and-set on the space's revision when given."""

    expected_revision: int | None = Field(default=None, ge=1)
    reason: str | None = Field(default=None, max_length=1024)


class SubjectEnsure(InSpace):
    subject_id: str = ident_field()
    kind: str | None = kind_field()


class SubjectRef(InSpace):
    subject_id: str = ident_field()


class SubjectFence(SubjectRef):
    action: Literal["fence", "unfence", "archive", "fence_context", "unfence_context"]
    context_id: str | None = Field(default=None, min_length=1, max_length=256)


class GrantsList(InSpace):
    view: Literal["own", "admin"] = "own"


class GrantList(Wire):
    grants: list[MemoryGrant]


class GrantIssue(InSpace):
    principal_id: str = Field(min_length=1, max_length=256)
    capabilities: list[Capability] = Field(min_length=1)
    subject_ids: list[str] | None = Field(default=None, max_length=256)
    context_ids: list[str] | None = Field(default=None, max_length=256)
    shared_access: bool = False
    expires_at: datetime | None = None


class GrantRevoke(InSpace):
    grant_id: uuid.UUID


# --- capture and review ---------------------------------------------------------------------

class Capture(InSpace):
    subject_id: str = ident_field()
    capture_scope: Placement
    items: list[Content] = Field(min_length=1, max_length=100)


class CandidatesList(Paged):
    state: Literal["pending", "consumed", "all"] = "pending"


class CandidateList(Wire):
    candidates: list[MemoryCandidate]
    next: str | None = None


class CandidateRef(InSpace):
    candidate_id: uuid.UUID


class Review(CandidateRef):
    decision: Literal["promote", "fragment", "drop"]
    content_override: Content | None = None
    fragments: list[Content] | None = Field(default=None, max_length=100)
    kind: str | None = kind_field()


# --- records and recall ---------------------------------------------------------------------

class RecordCreate(InSpace):
    subject_id: str = ident_field()
    kind: str | None = kind_field()
    content: Content
    placement: Placement
    source_context_id: str | None = Field(default=None, min_length=1, max_length=256)


class RecordRef(InSpace):
    record_id: uuid.UUID


class RecordRead(RecordRef):
    """``memory.records.get``: a record, with its receipt on request."""

    receipts: bool = _RECEIPTS


class RecordAnswer(RetainedRecord):
    """The record ``memory.records.get`` answers; ``receipts`` only when asked."""

    receipts: ReceiptsOut | None = _RECEIPTS_OUT


class RecordUpdate(RecordRef):
    expected_revision: int = Field(ge=1)
    content: Content | None = None
    kind: str | None = kind_field()


class RecordDelete(RecordRef):
    expected_revision: int = Field(ge=1)


class RecordPromote(RecordRef):
    expected_revision: int = Field(ge=1)
    placement: Placement


class RecordsList(Paged):
    subject_id: str | None = None
    selection: ReadSelection = Field(default_factory=ReadSelection)
    provenance: ProvenanceFilter | None = None
    cognition_filter: dict[str, Any] | None = None
    receipts: bool = _RECEIPTS


class RecordPage(Wire):
    records: list[RetainedRecord]
    total_authorized: int
    next: str | None = None
    receipts: ReceiptsOut | None = _RECEIPTS_OUT


class Recall(InSpace):
    query: str = Field(min_length=1, max_length=4096)
    subject_id: str | None = None
    selection: ReadSelection = Field(default_factory=ReadSelection)
    provenance: ProvenanceFilter | None = None
    cognition_filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=100)
    budget_tokens: int | None = Field(default=None, ge=1, le=100_000)
    receipts: bool = _RECEIPTS


class RecallHit(Wire):
    record: RetainedRecord
    score: float


class RecallAnswer(Wire):
    results: list[RecallHit]
    truncated: bool
    receipts: ReceiptsOut | None = _RECEIPTS_OUT


# --- profiles, receipts, reflections, transfer -----------------------------------------------

class ProfileGet(InSpace):
    subject_id: str = ident_field()
    kinds: list[str] | None = None


class ProfileAnswer(Wire):
    documents: list[ProfileDocument]


class ProfileUpdate(InSpace):
    subject_id: str = ident_field()
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")
    text: str = Field(max_length=200_000)
    expected_revision: int | None = Field(default=None, ge=0)


class ReceiptRef(InSpace):
    receipt_id: uuid.UUID


class ReflectionsRequest(InSpace):
    subject_id: str = ident_field()
    cognition_filter: dict[str, Any] | None = None


class ReflectionState(Wire):
    state_digest: str
    stale: bool
    data_sufficient: bool
    missing_required_kinds: list[str]


class ReflectionList(Wire):
    reflections: list[Reflection]


class ExportCreate(InSpace):
    chunk_bytes: int = Field(default=1 << 20, ge=1024, le=8 << 20)


class ExportChunkRef(InSpace):
    export_id: uuid.UUID
    ordinal: int = Field(ge=0)


class ImportStage(InSpace):
    import_id: uuid.UUID
    ordinal: int = Field(ge=0)
    final: bool
    data: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    manifest_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class ImportRef(InSpace):
    import_id: uuid.UUID





class Dispatch(Wire):
    """The body of ``POST /v1/spoke/memory``: one op, its request and an optional key."""

    op: str = Field(min_length=1, max_length=64)
    request: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255,
                                        pattern=r"^[\x21-\x7e]+$")


class DispatchTool(Dispatch):
    """The arguments of the ``spoke_memory`` MCP tool: a dispatch body and the flags this
    call negotiates (ADR 0067; over HTTP the ``X-Spoke-Capabilities`` header says them)."""

    capabilities: list[str] | None = Field(default=None, max_length=8)
