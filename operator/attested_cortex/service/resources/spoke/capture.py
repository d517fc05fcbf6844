"""Capture and candidate review of the spoke-memory family: ``memory.capture``,
``memory.candidates.list``/``.get``/``.dismiss`` and ``memory.candidates.review`` (the only
candidate → record path). Called by :mod:`.dispatch`.

A candidate's ``capture_scope`` is fixed at capture. Reading candidates needs ``capture`` or
``review`` covering it; review needs both ``review`` and ``records_write`` covering it, and
the records it makes inherit it verbatim (placement = capture scope, provenance = its
context and the candidate). Review is one transaction: the candidate is consumed (its
content cleared, the receipt named) and its records written together, or nothing is.
The classification is advisory and deterministic (:func:`classify`).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deciding import require_scope
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke import audit as spoke_audit
from attested_cortex.service.resources.spoke.ops import NewRecord, insert_record, mutate_in
from attested_cortex.service.resources.spoke.receipts import Effect
from attested_cortex.service.resources.spoke.views import rendered, rendered_one
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want
from attested_cortex.spoke.models import (
    Classification,
    Content,
    MemoryCandidate,
    Placement,
    Wire,
)
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import candidates as rows

_PREFERENCE: Final = ("prefer", "like", "love", "hate", "dislike", "favourite", "favorite")
_PROCEDURE: Final = ("how to", "step ", "first,", "then ")


def classify(content: Content) -> Classification:
    """Advisory: recorded cognition makes it semantic; preference or procedure words make it
    those; anything else is episodic. Never an authorization input."""
    if content.cognition:
        return "semantic"
    text = content.text.lower()
    if any(word in text for word in _PREFERENCE):
        return "preference"
    if any(word in text for word in _PROCEDURE):
        return "procedural"
    return "episodic"


def _scope(row: dict[str, Any]) -> Placement:
    context = row["context_id"]
    return Placement(shared=True) if context is None else Placement(context_id=context)


def candidate_view(row: dict[str, Any]) -> MemoryCandidate:
    proposed = row["proposed"]
    return MemoryCandidate(
        candidate_id=row["candidate_id"], space_id=row["space_id"],
        subject_id=row["subject_id"], capture_scope=_scope(row),
        proposed=Content(**proposed) if proposed is not None else Content(text=""),
        classification=row["classification"], state=row["state"],
        consumed_by=row["consumed_by"], created_at=row["created_at"],
        schema_version=row["schema_version"], extensions=row["extensions"])


async def capture(svc: Services, caller: Caller, req: rq.Capture, key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("capture", req.subject_id, req.capture_scope))
        await gate.writable_space(conn, caller, req.space_id)
        await gate.open_subject(conn, req.space_id, req.subject_id, req.capture_scope)
        made = []
        for item in req.items:
            candidate_id = uuid.uuid4()
            await rows.insert_candidate(conn, {
                "candidate_id": candidate_id, "space_id": req.space_id,
                "subject_id": req.subject_id, "context_id": req.capture_scope.context_id,
                "proposed": item.wire(), "classification": classify(item),
                "captured_by": caller.agent_id})
            made.append(str(candidate_id))
        return Effect(made)
    return await mutate_in(svc, caller, "memory.capture", req, key, effect)


def _readable(standing: gate.Access, row: dict[str, Any]) -> bool:
    return any(standing.allows(Want(c, row["subject_id"], _scope(row)))
               for c in ("capture", "review"))


async def candidates_list(svc: Services, caller: Caller, req: rq.CandidatesList,
                          key: str | None) -> Wire:
    pending = {"pending": True, "consumed": False, "all": None}[req.state]
    async with svc.db.connection() as conn:
        standing = await gate.access(conn, caller, req.space_id)
        await gate.existing_space(conn, req.space_id)
        found = [r for r in await rows.candidates(conn, req.space_id, pending=pending)
                 if _readable(standing, r)]
    start = _offset(req.cursor)
    page = found[start:start + req.limit]
    more = start + req.limit < len(found)
    return rq.CandidateList(candidates=rendered(page, candidate_view, key="candidate_id"),
                            next=str(start + req.limit) if more else None)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise InvalidInputError("cursor is not one this listing gave", field="cursor",
                                code="cursor_invalid")
    return int(cursor)


async def _candidate(conn: Conn, caller: Caller, req: rq.CandidateRef, *,
                     lock: bool = False) -> tuple[gate.Access, dict[str, Any]]:
    standing = await gate.access(conn, caller, req.space_id)
    row = await rows.candidate(conn, req.space_id, req.candidate_id, lock=lock)
    if row is None or not _readable(standing, row):
        raise NotFoundError(f"candidate {req.candidate_id} does not exist in this space",
                            code="candidate_not_found")
    return standing, row


async def candidates_get(svc: Services, caller: Caller, req: rq.CandidateRef,
                         key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        return rendered_one((await _candidate(conn, caller, req))[1], candidate_view,
                            key="candidate_id")


async def _consumable(conn: Conn, caller: Caller, req: rq.CandidateRef,
                      *needs: Any) -> dict[str, Any]:
    await gate.writable_space(conn, caller, req.space_id)
    standing, row = await _candidate(conn, caller, req, lock=True)
    for capability in needs:
        standing.require(Want(capability, row["subject_id"], _scope(row)))
    if row["state"] != "pending":
        raise ConflictError(f"candidate {req.candidate_id} was already consumed "
                            f"({row['state']})", code="candidate_consumed", state=row["state"])
    gate.writable_subject(await gate.existing_subject(conn, req.space_id, row["subject_id"]),
                          _scope(row))
    return row


async def candidates_dismiss(svc: Services, caller: Caller, req: rq.CandidateRef,
                             key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        await _consumable(conn, caller, req, "review")
        await rows.consume(conn, req.candidate_id, state="dismissed", receipt_id=receipt)
        return Effect([str(req.candidate_id)])
    return await mutate_in(svc, caller, "memory.candidates.dismiss", req, key, effect)


async def candidates_review(svc: Services, caller: Caller, req: rq.Review,
                            key: str | None) -> Wire:
    contents = _reviewed(req)
    if req.decision == "drop":  # clears the captured content, writes nothing (ADR 0083)
        require_scope(caller, "memory.forget", req.space_id)

    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        row = await _consumable(conn, caller, req, "review", "records_write")
        if contents != [] and not await spoke_audit.candidate_recorded(conn, row):
            raise ConflictError(  # its content and scope would be signed into records
                f"candidate {req.candidate_id} is not what its capture record says (changed "
                "behind the server; the deep audit names it)", code="candidate_unrecorded")
        proposed = Content(**row["proposed"])
        made = []
        for content in contents if contents is not None else [proposed]:
            made.append(await insert_record(svc, conn, caller, NewRecord(
                req.space_id, row["subject_id"], req.kind, content, _scope(row),
                row["context_id"], req.candidate_id)))
        state = {"promote": "promoted", "fragment": "fragmented", "drop": "dropped"}
        await rows.consume(conn, req.candidate_id, state=state[req.decision],
                           receipt_id=receipt)
        return Effect([str(req.candidate_id), *(str(m.id) for m in made)], written=made)
    return await mutate_in(svc, caller, "memory.candidates.review", req, key, effect)


def _reviewed(req: rq.Review) -> list[Content] | None:
    """The contents a decision writes (None: the proposed content), checked before any
    state changes: promote may override, fragment names its fragments, drop writes none."""
    if req.decision == "fragment":
        if not req.fragments or req.content_override is not None:
            raise InvalidInputError("a fragment decision carries fragments (and no "
                                    "content_override)", field="request.fragments")
        return list(req.fragments)
    if req.fragments is not None:
        raise InvalidInputError(f"a {req.decision} decision carries no fragments",
                                field="request.fragments")
    if req.decision == "drop":
        if req.content_override is not None:
            raise InvalidInputError("a drop decision carries no content_override",
                                    field="request.content_override")
        return []
    return [req.content_override] if req.content_override is not None else None
