"""Reading many records: ``memory.records.list`` and ``memory.recall``, and the placement
change ``memory.records.promote``. Called by :mod:`.dispatch`.

Both reads work on the **authorized set** in SQL (:mod:`attested_cortex.store.spoke.reading`,
migration 0023): the space's live records (of the subject when named) that the caller's live
grants reach for ``records_read`` (and ``recall`` too for a recall: ADR 0082), narrowed by the
:class:`ReadSelection` (contexts, shared, both, or everything authorized) and the
:class:`ProvenanceFilter` (source contexts), composed by AND, before any count, rank, page
or budget. :func:`reach` folds the grants and the request into one :class:`~.Reach` (a box
per grant), so a read costs the records it may see, not the space.

A listing pages by (created_at, id); ``total_authorized`` is a SQL count of the set, and
the cursor binds a digest of the set (its count and an order-free hash of its ids and
revisions, from the same statement), the space's revision, the caller's live grants and the
request's filters: any state or grant change between pages answers 409 ``cursor_invalid``.
A recall is the native recall (:mod:`attested_cortex.store.recall`: full text, and vectors
where an embedder runs) over the set, with the token budget and the byte bound of
``/v1/recall``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import json
import uuid
from datetime import datetime
from typing import Any

from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.service.pipeline import write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources import answers
from attested_cortex.service.resources import recall as native
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke import proofs as record_proofs
from attested_cortex.service.resources.spoke.ops import mutate_in, writable_record
from attested_cortex.service.resources.spoke.receipts import Effect
from attested_cortex.service.resources.spoke.views import record_view, rendered, wire
from attested_cortex.service.workers import embedding
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want, live
from attested_cortex.spoke.models import (
    Capability,
    Placement,
    ProvenanceFilter,
    ReadSelection,
    Wire,
)
from attested_cortex.store import memories as memory_rows
from attested_cortex.store import recall as store_recall
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import candidates as listing
from attested_cortex.store.spoke import memory as rows
from attested_cortex.store.spoke import reading as reads
from attested_cortex.store.spoke.reading import Box, Reach

Row = dict[str, Any]


def placement_of(row: Row) -> Placement:
    context = row["context_id"]
    return Placement(shared=True) if context is None else Placement(context_id=context)


def reach(standing: gate.Access, capability: Capability, *, space_id: str,
          subject_id: str | None, selection: ReadSelection,
          provenance: ProvenanceFilter | None) -> Reach:
    """What a read may touch: the caller's coverage for ``capability`` and for
    ``records_read`` (a read shows records: never one ``memory.records.get`` would not, ADR
    0082), narrowed by the request. The authority: the whole space; else a box per pair of
    live grants, one holding each, met. Pure."""
    boxes = _boxes(standing, capability)
    if capability != "records_read":
        readable = _boxes(standing, "records_read")
        boxes = [m for b in boxes for r in readable if (m := _meet(b, r)) is not None]
    narrowed = (_narrow(b, subject_id, selection) for b in boxes)
    return Reach(space_id, tuple(dict.fromkeys(b for b in narrowed if b is not None)),
                 None if provenance is None else tuple(provenance.source_context_ids))


def _boxes(standing: gate.Access, capability: Capability) -> list[Box]:
    if standing.authority:
        return [Box(None, None, True)]
    return [Box(_opt(g.subject_ids), _opt(g.context_ids), g.shared_access)
            for g in live(standing.grants, standing.now) if capability in g.capabilities]


def _meet(one: Box, other: Box) -> Box | None:
    """The records both boxes hold (None: none)."""
    subjects = _both(one.subjects, other.subjects)
    contexts = _both(one.contexts, other.contexts)
    shared = one.shared and other.shared
    if subjects == () or (contexts == () and not shared):
        return None
    return Box(subjects, contexts, shared)


def _both(one: tuple[str, ...] | None,
          other: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if one is None or other is None:
        return other if one is None else one
    return tuple(v for v in one if v in other)


def _opt(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(dict.fromkeys(values))


def _narrow(box: Box, subject_id: str | None, selection: ReadSelection) -> Box | None:
    """``box`` within the request's subject and placement selection (None: nothing left)."""
    subjects = box.subjects
    if subject_id is not None:
        if subjects is not None and subject_id not in subjects:
            return None
        subjects = (subject_id,)
    mode = selection.mode
    wanted = None if mode == "all_authorized" else (
        () if mode == "shared" else tuple(dict.fromkeys(selection.context_ids)))
    contexts = box.contexts if wanted is None else wanted if box.contexts is None else \
        tuple(c for c in box.contexts if c in wanted)
    shared = box.shared and mode != "contexts"
    if contexts == () and not shared:
        return None
    return Box(subjects, contexts, shared)


def _digest(space: Row, standing: gate.Access, where: Reach, found: reads.Page) -> str:
    state = [space["revision"], sorted(str(g.grant_id) for g in gate.live_grants(standing)),
             dataclasses.asdict(where), found.total, found.state]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:32]


def _cursor(row: Row, digest: str) -> str:
    position = [row["created_at"].isoformat(), str(row["memory_id"]), digest]
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode()


Position = tuple[datetime, uuid.UUID]


def _resume(cursor: str | None) -> tuple[Position | None, str | None]:
    """The position and the digest a cursor carries (none without a cursor)."""
    if cursor is None:
        return None, None
    try:
        at, ident, bound = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        position = (datetime.fromisoformat(at), uuid.UUID(ident))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise InvalidInputError("cursor is not one this listing gave", field="cursor",
                                code="cursor_invalid") from exc
    if position[0].tzinfo is None or not isinstance(bound, str):
        raise InvalidInputError("cursor is not one this listing gave", field="cursor",
                                code="cursor_invalid")
    return position, bound


def _changed() -> ConflictError:
    return ConflictError("the records or grants changed since this cursor was given; "
                         "list again from the start", code="cursor_invalid")


async def records_list(svc: Services, caller: Caller, req: rq.RecordsList,
                       key: str | None) -> Wire:
    after, bound = _resume(req.cursor)
    async with svc.db.connection() as conn:
        standing, space = await gate.standing(conn, caller, req.space_id)
        where = reach(standing, "records_read", space_id=req.space_id,
                      subject_id=req.subject_id, selection=req.selection,
                      provenance=req.provenance)
        found = await reads.page(conn, where, after=after, limit=req.limit) \
            if where.boxes else reads.Page([], False, 0, "0")
    digest = _digest(space, standing, where, found)
    if bound is not None and bound != digest:
        raise _changed()
    # a stored row the wire model refuses is left out (ADR 0084); the page still ends
    # where it was read, so the next page starts past it
    shown = [(r, v) for r in found.records for v in rendered([r], record_view, key="memory_id")]
    kept = len(answers.fitting([v for _, v in shown], wire,
                               max_bytes=svc.limits.max_answer_bytes))
    last = shown[kept - 1][0] if kept < len(shown) else (
        found.records[-1] if found.records else None)
    more = found.more or kept < len(shown)
    proofs = await record_proofs.record_receipts(svc, [r for r, _ in shown[:kept]]) \
        if req.receipts else None
    return rq.RecordPage(records=[v for _, v in shown[:kept]], total_authorized=found.total,
                         next=_cursor(last, digest) if more and last is not None else None,
                         receipts=proofs)


async def recall(svc: Services, caller: Caller, req: rq.Recall, key: str | None) -> Wire:
    """The native recall over the records the caller's ``recall`` grants reach: the query
    embeds (hybrid mode) while the full-text half runs, as for ``/v1/recall``."""
    async with svc.db.connection() as conn:
        standing, _ = await gate.standing(conn, caller, req.space_id)
        where = reach(standing, "recall", space_id=req.space_id, subject_id=req.subject_id,
                      selection=req.selection, provenance=req.provenance)
        if not where.boxes:
            return rq.RecallAnswer(results=[], truncated=False)
        planning = asyncio.create_task(embedding.plan_query(svc.vectors, req.query, None))
        scope = store_recall.scope_of(req.space_id, reads.restriction(conn, where))
        async with native.searching(svc, planning, scope) as halves:
            hits = await halves.hits(conn, req.query, req.limit)
        full = {r["memory_id"]: r for r in await rows.records_by_id(
            conn, req.space_id, [h.memory.id for h in hits])}
    kept = native.apply_budget([h for h in hits if h.memory.id in full], req.budget_tokens)
    results = [rq.RecallHit(record=view, score=round(h.score, 6)) for h in kept.hits
               for view in rendered([full[h.memory.id]], record_view, key="memory_id")]
    shown = answers.fitting(results, wire, max_bytes=svc.limits.max_answer_bytes)
    proofs = await record_proofs.record_receipts(svc, [
        full[r.record.record_id] for r in results[:len(shown)]]) if req.receipts else None
    return rq.RecallAnswer(results=results[:len(shown)],
                           truncated=kept.truncated or len(shown) < len(results),
                           receipts=proofs)


async def records_promote(svc: Services, caller: Caller, req: rq.RecordPromote,
                          key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        row = await writable_record(conn, caller, req, req.expected_revision)
        standing = await gate.access(conn, caller, req.space_id)
        standing.require(Want("records_write", row["subject_id"], req.placement))
        gate.writable_subject(await gate.existing_subject(conn, req.space_id,
                                                          row["subject_id"]), req.placement)
        if placement_of(row) == req.placement:
            raise ConflictError("the record is already at this placement",
                                code="placement_unchanged")
        current = await memory_rows.get(conn, req.record_id, for_update=True)
        await write_records.require_recorded_memory(conn, current)
        memory = await memory_rows.update(conn, current, changes={},
                                          expected_revision=req.expected_revision)
        await listing.set_placement(conn, req.record_id, req.placement.context_id)
        await write_records.record_memory(svc, conn, caller, "memory.updated", memory, None)
        return Effect([str(memory.id)], memory.revision, written=(memory,))
    return await mutate_in(svc, caller, "memory.records.promote", req, key, effect)
