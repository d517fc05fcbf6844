"""The thirteen wire models of seed 001, one typed definition each (pydantic).

Where the seed leaves a field open, the choice is written here and in docs/spoke-memory.md
and kept stable. Every durable object carries ``schema_version`` (this module's
:data:`SCHEMA_VERSION`) and ``extensions`` (an open object a provider or client may use;
the cortex stores and returns it unchanged). Unknown members are refused everywhere
(``extra="forbid"``): the family is a closed contract. ``Content`` keeps an absent member
apart from an explicit value: absent members are not serialized, so ``cognition: []`` and
no ``cognition`` stay two different wire values (:meth:`Content.wire`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

#: The version of every durable object this build writes.
SCHEMA_VERSION: Final = 1
#: The family's protocol version, reported by ``memory.describe``.
PROTOCOL_VERSION: Final = "2026-12.1"

Flag = Literal["spoke-memory", "spoke-memory-reflection", "spoke-memory-transfer"]
#: What a grant may allow (closed). ``admin`` covers freeze/unfreeze and subject fencing.
Capability = Literal[
    "records_read", "records_write", "capture", "review", "recall", "profiles_read",
    "profiles_write", "reflections", "grants", "admin", "transfer",
]
SubjectState = Literal["active", "fenced", "archived"]
ReceiptStatus = Literal["committed", "pending", "failed"]
CandidateState = Literal["pending", "promoted", "fragmented", "dropped", "dismissed"]
Classification = Literal["episodic", "semantic", "preference", "procedural", "other"]
SelectionMode = Literal["contexts", "shared", "contexts_and_shared", "all_authorized"]



def ident_field() -> Any:
    """An opaque id: 1..256 printable ASCII characters without spaces."""
    return Field(min_length=1, max_length=256, pattern=r"^[\x21-\x7e]+$")


def context_field() -> Any:
    """A placement context id (absent: none), shaped like :func:`ident`."""
    return Field(default=None, min_length=1, max_length=256, pattern=r"^[\x21-\x7e]+$")


def kind_field() -> Any:
    """An optional namespaced kind, ``namespace:name`` in lower case (``person:human``)."""
    return Field(default=None, min_length=3, max_length=128,
                 pattern=r"^[a-z0-9_.-]+:[a-z0-9_.-]+$")


class Wire(BaseModel):
    """The base of every wire model: closed, no NUL in any string (checked at the body)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Durable(Wire):
    """A durable object: versioned and extensible."""

    schema_version: int = SCHEMA_VERSION
    extensions: dict[str, Any] = Field(default_factory=dict)


class Sparse(Wire):
    """A model whose members never set are not serialized, wherever it is nested: what the
    client sent is what it reads back (an absent member stays absent, ``[]`` stays ``[]``)."""

    @model_serializer(mode="wrap")
    def _present(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items()
                if k in self.model_fields_set or type(self).model_fields[k].is_required()}


class CognitionRecord(Sparse):
    """One closed standard cognition record as recorded (``view: "recorded_at"`` always).
    The cortex validates its shape; it never derives one from text (seed: never promoted by
    placement alone)."""

    view: Literal["recorded_at"]
    kind: str = Field(min_length=1, max_length=128)
    attribution: str = Field(min_length=1, max_length=256)
    basis: str = Field(min_length=1, max_length=4096)
    recorded_at: datetime
    value: dict[str, Any] = Field(default_factory=dict)


class Content(Sparse):
    """Untrusted memory content: ``text``, optional opaque ``structured``, optional
    ``cognition``. A tombstone's content is exactly ``{"text": ""}``."""

    text: str = Field(max_length=1_000_000)
    structured: dict[str, Any] | None = None
    cognition: list[CognitionRecord] | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON value: members never set are absent (``[]`` stays ``[]``)."""
        return self.model_dump(mode="json")


TOMBSTONE: Final = Content(text="")


class Placement(Wire):
    """Where a record (or a candidate's capture scope) sits: one context, or shared."""

    shared: bool = False
    context_id: str | None = context_field()

    @model_validator(mode="after")
    def _one(self) -> Placement:
        if self.shared == (self.context_id is not None):
            raise ValueError("a placement is either shared or names one context_id")
        return self


class Provenance(Wire):
    """Where a record came from: the context it was captured in and by whom."""

    source_context_id: str | None = context_field()
    captured_by: str
    candidate_id: uuid.UUID | None = None


class MemorySpace(Durable):
    """One authoritative store (ADR 0060: a namespace); unit of freeze, export, import."""

    space_id: str
    provider: str
    revision: int = Field(ge=1)
    frozen: bool
    authority_generation: int = Field(ge=1)
    pending_receipts: int = Field(ge=0)
    created_at: datetime


class Subject(Durable):
    """The entity memory is about: a stable opaque id and an optional namespaced kind."""

    space_id: str
    subject_id: str = ident_field()
    kind: str | None = kind_field()
    state: SubjectState
    fenced_context_ids: list[str] = Field(default_factory=list)
    revision: int = Field(ge=1)
    created_at: datetime


class Principal(Wire):
    """The authenticated caller, as the admission context established it (not durable)."""

    principal_id: str
    auth: str


class MemoryGrant(Durable):
    """A provider-enforced authorization record. ``subject_ids``/``context_ids`` absent
    (null) means every subject/context; ``shared_access`` covers shared placement."""

    grant_id: uuid.UUID
    space_id: str
    principal_id: str
    issued_by: str
    capabilities: list[Capability] = Field(min_length=1)
    subject_ids: list[str] | None = None
    context_ids: list[str] | None = None
    shared_access: bool = False
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    created_at: datetime


class RetainedRecord(Durable):
    """Reviewed or directly authored durable memory (ADR 0060: a memory row, same id)."""

    record_id: uuid.UUID
    space_id: str
    subject_id: str
    kind: str | None = kind_field()
    content: Content
    placement: Placement
    provenance: Provenance
    revision: int = Field(ge=1)
    tombstone: bool = False
    created_at: datetime
    updated_at: datetime


class MemoryCandidate(Durable):
    """Provisional capture awaiting review; ``capture_scope`` never changes."""

    candidate_id: uuid.UUID
    space_id: str
    subject_id: str
    capture_scope: Placement
    proposed: Content
    classification: Classification
    state: CandidateState
    consumed_by: uuid.UUID | None = None  # the receipt that consumed it
    created_at: datetime


class ProfileDocument(Durable):
    """Trusted, author-maintained content of one kind (personality, preferences, ...)."""

    space_id: str
    subject_id: str
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")
    text: str = Field(max_length=200_000)
    revision: int = Field(ge=0)  # 0: the kind is absent (honest-empty)
    updated_at: datetime | None = None


class RecordRevision(Wire):
    """One pinned record of a reflection's basis."""

    record_id: uuid.UUID
    revision: int = Field(ge=1)


class ReflectionBasis(Wire):
    """What a reflection was generated over; its digest is the ``state_digest``."""

    records: list[RecordRevision]
    profile_revisions: dict[str, int]
    engine_policy: str
    cognition_filter: dict[str, Any] | None = None


class Reflection(Durable):
    """Derived synthesis over a pinned basis; ``stale`` is computed when it is read."""

    reflection_id: uuid.UUID
    space_id: str
    subject_id: str
    text: str
    basis: ReflectionBasis
    state_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    stale: bool
    created_at: datetime


class MemoryReceipt(Durable):
    """A content-free operation outcome (the family's single async model)."""

    receipt_id: uuid.UUID
    space_id: str
    op: str
    status: ReceiptStatus
    idempotency_key: str | None = None
    request_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    refs: list[str] = Field(default_factory=list)  # ids the op created or changed
    revision: int | None = None  # the revision the op reached, when it has one
    error_code: str | None = None
    created_at: datetime
    completed_at: datetime | None = None


class ReadSelection(Wire):
    """Which placements a read covers; always intersected with the caller's grants."""

    mode: SelectionMode = "all_authorized"
    context_ids: list[str] = Field(default_factory=list, max_length=256)


class ProvenanceFilter(Wire):
    """A source-context projection, independent of placement (AND with the selection)."""

    source_context_ids: list[str] = Field(min_length=1, max_length=256)


class MemoryExportBundle(Durable):
    """A versioned, digested logical export of one space."""

    export_id: uuid.UUID
    space_id: str
    #: The logical bundle's container with the ``space`` content kind (ADR 0070).
    format: Literal["attested-cortex-bundle/1+space"] = "attested-cortex-bundle/1+space"
    chunk_count: int = Field(ge=1)
    manifest_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    authority_generation: int = Field(ge=1)
    created_at: datetime


class MemoryExportChunk(Wire):
    """A bounded wire unit of an export: base64 data and its SHA-256."""

    export_id: uuid.UUID
    ordinal: int = Field(ge=0)
    final: bool
    data: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    manifest_digest: str = Field(pattern=r"^[0-9a-f]{64}$")  # of the export it belongs to


#: The thirteen models of the seed, by name (the published schemas).
MODELS: Final[dict[str, type[Wire]]] = {m.__name__: m for m in (
    MemorySpace, Subject, Principal, MemoryGrant, RetainedRecord, MemoryCandidate,
    ProfileDocument, Reflection, MemoryReceipt, ReadSelection, ProvenanceFilter,
    MemoryExportBundle, MemoryExportChunk,
)}
