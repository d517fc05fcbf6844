"""One typed model per hook event payload: what the service fires and what hooks receive.

The service layer builds every payload through these models (:func:`payload`), and the JSON
Schemas in ``docs/hooks.md`` are generated from them (:mod:`.payload_schemas`), so the documented
contract and the bytes on the wire cannot drift apart; ``tests/server/test_hook_payloads.py``
validates every fired payload against the generated schemas. Objects stay open
(``additionalProperties: true``) so a field added later never breaks a hook. Values that may
be absent are typed ``... | None`` and so documented as nullable. Pure data.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from attested_cortex.hooks.events import EventName


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class MemoryPayload(_Payload):
    """A stored memory, as the API returns it."""

    id: str
    namespace: str
    title: str
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    author: str
    revision: int
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    updated_at: str = Field(json_schema_extra={"format": "date-time"})
    deleted: bool
    deleted_at: str | None


class LinkPayload(_Payload):
    """A stored link, as the API returns it."""

    id: str
    src_id: str
    dst_id: str
    relation: str
    valid_from: str = Field(json_schema_extra={"format": "date-time"})
    valid_until: str | None
    observed_by: str
    attest_level: str
    signed_by: str | None
    signature: str | None
    signed_at: str | None
    created_at: str = Field(json_schema_extra={"format": "date-time"})


class PreStore(_Payload):
    """The memory about to be stored; a Modify rewrites what is stored."""

    namespace: str
    content: str
    title: str
    tags: list[str]
    metadata: dict[str, Any]


class UpdateChanges(_Payload):
    """The fields a PATCH changes (only those sent)."""

    content: str | None = None
    title: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    expected_revision: int | None = None


class PreUpdate(_Payload):
    """The memory about to change and its ``changes``; a Modify rewrites the changes."""

    id: str
    namespace: str
    author: str
    changes: UpdateChanges


class PreDelete(_Payload):
    """The memory about to be tombstoned."""

    id: str
    namespace: str
    author: str


class PreLink(_Payload):
    """The link about to be created."""

    src_id: str
    dst_id: str
    relation: str
    valid_from: str | None
    valid_until: str | None
    signature: str | None
    id: str | None


class PreInvalidate(_Payload):
    """The link about to be closed and the requested end of its validity."""

    link_id: str
    valid_until: str | None


class PreRecall(_Payload):
    """A recall query."""

    query: str
    namespace: str | None
    limit: int
    budget_tokens: int | None


class Hit(MemoryPayload):
    """A recalled memory with its score."""

    score: float


class PostRecall(PreRecall):
    """The query and the hits it found (in rank order)."""

    results: list[Hit]
    truncated: bool


class PreSearch(_Payload):
    """A listing of a namespace subtree (``GET /v1/memories``); ``query`` is null: a listing
    has no search text."""

    query: str | None
    namespace: str | None
    limit: int


class PostSearch(PreSearch):
    """The listing and the memories found, newest first."""

    results: list[MemoryPayload]
    truncated: bool


class PreKgQuery(_Payload):
    """A traversal (``operation: query``) or a timeline (``timeline``: ``start_id`` is the
    memory, depth 1)."""

    operation: Literal["query", "timeline"]
    start_id: str
    depth: int = Field(ge=1, le=5)
    relations: list[str] | None
    valid_at: str | None


class PostKgQuery(PreKgQuery):
    """The traversal's nodes and edges (a timeline has no nodes; its edges are its links)."""

    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    truncated: bool


class PreKgPaths(_Payload):
    """A path search."""

    src_id: str
    dst_id: str
    max_depth: int = Field(ge=1, le=7)
    limit: int
    valid_at: str | None


class PostKgPaths(PreKgPaths):
    """The paths found."""

    paths: list[dict[str, Any]]
    truncated: bool


class PreIndex(_Payload):
    """The text about to be indexed; ``memory_id`` is null for a memory not stored yet.
    A Modify of ``title``/``content``/``tags`` changes what is stored and indexed."""

    memory_id: str | None
    namespace: str
    reason: Literal["store", "update"]
    title: str | None
    content: str | None
    tags: list[str] | None


class PostIndex(_Payload):
    """The memory whose index entry was written."""

    memory_id: str
    namespace: str
    reason: Literal["store", "update"]
    revision: int


class PreTranscript(_Payload):
    """A transcript about to be stored; a Modify of ``content``, ``metadata`` or ``namespace``
    rewrites what is stored (the reference redaction hook masks credentials here)."""

    namespace: str
    content: str
    metadata: dict[str, Any]
    owner: str


class PostTranscript(_Payload):
    """A stored transcript (its text as stored, after any pre- hook Modify)."""

    id: str
    namespace: str
    content: str
    metadata: dict[str, Any]
    owner: str
    raw_bytes: int
    stored_bytes: int
    created_at: str = Field(json_schema_extra={"format": "date-time"})


class PreApproval(_Payload):
    """An operation about to be held for a human decision (not fired yet)."""

    approval_id: str
    operation: str
    agent_id: str
    reason: str


class PostApproval(PreApproval):
    """A decided approval (not fired yet)."""

    decision: str
    decided_by: str


class PreSpokeWrite(_Payload):
    """A mutating spoke-memory op about to run (ADR 0067): its wire name, its space, the
    acting principal and its decoded ``request`` (defaults filled in). A Modify may rewrite
    ``request`` (re-decoded by the op's request model and re-authorized); ``op`` and
    ``principal`` are fixed."""

    op: str
    space_id: str
    principal: str
    request: dict[str, Any]


class PostSpokeWrite(PreSpokeWrite):
    """The op's ``MemoryReceipt`` (committed, pending or replayed: a repeat with the same
    idempotency key answers the first receipt)."""

    receipt: dict[str, Any]


#: The payload model of every event.
MODELS: Final[dict[EventName, type[BaseModel]]] = {
    "pre_store": PreStore, "post_store": MemoryPayload,
    "pre_update": PreUpdate, "post_update": MemoryPayload,
    "pre_delete": PreDelete, "post_delete": MemoryPayload,
    "pre_link": PreLink, "post_link": LinkPayload,
    "pre_invalidate": PreInvalidate, "post_invalidate": LinkPayload,
    "pre_recall": PreRecall, "post_recall": PostRecall,
    "pre_search": PreSearch, "post_search": PostSearch,
    "pre_kg_query": PreKgQuery, "post_kg_query": PostKgQuery,
    "pre_kg_paths": PreKgPaths, "post_kg_paths": PostKgPaths,
    "pre_index": PreIndex, "post_index": PostIndex,
    "pre_transcript_store": PreTranscript, "post_transcript_store": PostTranscript,
    "pre_approval": PreApproval, "post_approval": PostApproval,
    "pre_spoke_write": PreSpokeWrite, "post_spoke_write": PostSpokeWrite,
}  # fmt: skip


def payload(event: EventName, **fields: Any) -> dict[str, Any]:
    """``event``'s payload as JSON: built (and so checked) by its model."""
    return MODELS[event].model_validate(fields).model_dump(mode="json", exclude_unset=True)


def payload_with(event: EventName, views: dict[str, list[dict[str, Any]]],
                 **fields: Any) -> dict[str, Any]:
    """``event``'s payload whose list fields ``views`` hold the API's own JSON views (a
    recall's hits, a listing's memories, a traversal's nodes and edges): the other fields
    are checked by the model as in :func:`payload`, the views pass as they are.

    Validating ten recall hits and dumping them back cost about 180 us of every hooked
    recall on this machine (the round trip to an idle daemon hook costs 0.5 ms), and a
    depth-5 kg/query has thousands of nodes and edges. The views are the dicts the API
    answers with, so they already have the documented shape, and
    ``tests/server/test_pipeline.py`` checks every fired payload against the schema.
    """
    built = payload(event, **fields, **dict.fromkeys(views, ()))
    built.update(views)
    return built
