"""Reading many records: ``memory.records.list`` and ``memory.recall``, and the placement
change ``memory.records.promote``. Called by :mod:`.spoke_dispatch`.

Both reads start from the **authorized set**: the space's live records (of the subject when
named) that the caller's grants cover for ``records_read`` (``recall`` for a recall), then
the :class:`ReadSelection` (contexts, shared, both, or everything authorized) and the
:class:`ProvenanceFilter` (source contexts), composed by AND, before any count, rank, page
or budget. ``total_authorized`` counts that set. A listing's cursor binds a digest of the
set (ids and revisions), the space's revision and the caller's grants: any state or grant
change between pages answers 409 ``cursor_invalid``. Recall ranks by full text within the
set and keeps hits within ``budget_tokens`` like ``/v1/recall``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import uuid
from typing import Any

from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.service.pipeline import write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources import spoke_access as gate
from attested_cortex.service.resources.spoke_ops import mutate_in, writable_record
from attested_cortex.service.resources.spoke_receipts import Effect
from attested_cortex.service.resources.spoke_views import record_view
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want
from attested_cortex.spoke.models import (
    Capability,
    Placement,
    ProvenanceFilter,
    ReadSelection,
    Wire,
)
from attested_cortex.store import memories as memory_rows
from attested_cortex.store import spoke_candidates as listing
from attested_cortex.store import spoke_memory as rows
from attested_cortex.store.database import Conn

Row = dict[str, Any]


def placement_of(row: Row) -> Placement:
    context = row["context_id"]
    return Placement(shared=True) if context is None else Placement(context_id=context)


def selected(row: Row, selection: ReadSelection, provenance: ProvenanceFilter | None) -> bool:
    """Whether an authorized record passes the selection and the provenance filter."""
    context, mode = row["context_id"], selection.mode
    if mode == "shared" and context is not None:
        return False
    if mode == "contexts" and context not in selection.context_ids:
        return False
    if mode == "contexts_and_shared" and context is not None \
            and context not in selection.context_ids:
        return False
    return provenance is None or row["source_context_id"] in provenance.source_context_ids


async def authorized(conn: Conn, caller: Caller, *, space_id: str, subject_id: str | None,
                     capability: Capability, selection: ReadSelection,
                     provenance: ProvenanceFilter | None) -> tuple[gate.Access, list[Row]]:
    """The caller's standing and the records it may read that pass the filters, in order."""
    standing = await gate.access(conn, caller, space_id)
    await gate.existing_space(conn, space_id)
    keys = await listing.record_keys(conn, space_id, subject_id)
    return standing, [r for r in keys if standing.allows(
        Want(capability, r["subject_id"], placement_of(r))) and selected(r, selection,
                                                                         provenance)]


def _digest(space: Row, standing: gate.Access, found: list[Row]) -> str:
    state = [space["revision"], sorted(str(g.grant_id) for g in gate.live_grants(standing)),
             [(str(r["memory_id"]), r["revision"]) for r in found]]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:32]


def _cursor(offset: int, digest: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([offset, digest]).encode()).decode()


def _resume(cursor: str | None, digest: str) -> int:
    if cursor is None:
        return 0
    try:
        offset, bound = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise InvalidInputError("cursor is not one this listing gave", field="cursor",
                                code="cursor_invalid") from exc
    if bound != digest or not isinstance(offset, int):
        raise ConflictError("the records or grants changed since this cursor was given; "
                            "list again from the start", code="cursor_invalid")
    return offset


async def records_list(svc: Services, caller: Caller, req: rq.RecordsList,
                       key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        standing, found = await authorized(
            conn, caller, space_id=req.space_id, subject_id=req.subject_id,
            capability="records_read", selection=req.selection, provenance=req.provenance)
        space = await gate.existing_space(conn, req.space_id)
        digest = _digest(space, standing, found)
        start = _resume(req.cursor, digest)
        page = found[start:start + req.limit]
        full = await rows.records_by_id(conn, req.space_id, [r["memory_id"] for r in page])
    more = start + req.limit < len(found)
    return rq.RecordPage(records=[record_view(r) for r in full], total_authorized=len(found),
                         next=_cursor(start + req.limit, digest) if more else None)


async def recall(svc: Services, caller: Caller, req: rq.Recall, key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        _, found = await authorized(
            conn, caller, space_id=req.space_id, subject_id=req.subject_id,
            capability="recall", selection=req.selection, provenance=req.provenance)
        hits = await listing.ranked(conn, [r["memory_id"] for r in found], req.query,
                                    req.limit)
        full = await rows.records_by_id(conn, req.space_id, [h["id"] for h in hits])
    results, used = [], 0
    for hit, row in zip(hits, full, strict=True):
        cost = max(1, math.ceil(len(row["text"]) / 4))
        if req.budget_tokens is not None and used + cost > req.budget_tokens:
            continue
        used += cost
        results.append(rq.RecallHit(record=record_view(row), score=round(hit["score"], 6)))
    return rq.RecallAnswer(results=results, truncated=len(results) < len(hits))


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
        return Effect([str(memory.id)], memory.revision)
    return await mutate_in(svc, caller, "memory.records.promote", req, key, effect)
