"""Spoke-memory ops: describe, spaces, subjects, grants, records and receipts (issue 28),
and the helpers the family's other modules write records and receipts with.

Each handler takes the decoded request and answers a wire model: a read its payload, a
write the :class:`MemoryReceipt` of :func:`.receipts.mutate`, inside whose transaction
it re-authorizes (:mod:`.access`), checks freeze and fences and writes. A record is a
memory row in the space's namespace plus its side row (ADR 0060), written with the memory's
chain record in the same transaction. Called by :mod:`.dispatch` only.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.service.pipeline import settling, write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deciding import require_scope
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke import audit as spoke_audit
from attested_cortex.service.resources.spoke import proofs as record_proofs
from attested_cortex.service.resources.spoke.receipts import Effect, EffectFn, mutate
from attested_cortex.service.resources.spoke.views import (
    grant_view,
    receipt_view,
    record_view,
    rendered_one,
    space_view,
    subject_view,
)
from attested_cortex.spoke import reflecting
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want, parent_of
from attested_cortex.spoke.models import (
    PROTOCOL_VERSION,
    Capability,
    Content,
    MemoryGrant,
    Placement,
    Wire,
)
from attested_cortex.spoke.operations import CORE, REFLECTION, TRANSFER
from attested_cortex.store import memories as memory_rows
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import memory as rows

Handler = Callable[[Services, Caller, Any, str | None], Awaitable[Wire]]


async def describe(svc: Services, caller: Caller, req: rq.Empty, key: str | None) -> Wire:
    return rq.DescribeAnswer(
        protocol_version=PROTOCOL_VERSION, served_flags=[CORE, REFLECTION, TRANSFER],
        limits={"max_body_bytes": svc.limits.max_body_bytes, "max_page": 500,
                "max_capture_items": 100, "max_import_bytes": svc.limits.max_import_bytes,
                "max_staged_bytes_per_agent": svc.limits.max_staged_bytes_per_agent},
        required_profile_kinds=list(reflecting.REQUIRED_PROFILE_KINDS),
        engine_policy_version=reflecting.ENGINE_POLICY
        if svc.pending is None or svc.pending.reflector is None
        else svc.pending.reflector.policy)


async def spaces_list(svc: Services, caller: Caller, req: rq.Empty, key: str | None) -> Wire:
    """The spaces where the caller has the authority or any live grant."""
    async with svc.db.connection() as conn:
        found = []
        for row in await rows.spaces(conn):
            standing = await gate.access(conn, caller, row["space_id"])
            if standing.authority or gate.live_grants(standing):
                found.append(space_view(row))
    return rq.SpaceList(spaces=found)


def _freezing(frozen: bool) -> Handler:
    async def run(svc: Services, caller: Caller, req: rq.SpaceRevision,
                  key: str | None) -> Wire:
        async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
            (await gate.access(conn, caller, req.space_id)).require(Want("admin"))
            space = await gate.existing_space(conn, req.space_id, lock=True)
            if req.expected_revision is not None and req.expected_revision != space["revision"]:
                raise _stale("space", req.space_id, space["revision"], req.expected_revision)
            if space["frozen"] == frozen:
                raise ConflictError(f"space {req.space_id!r} is already "
                                    f"{'frozen' if frozen else 'open'}",
                                    code="space_frozen" if frozen else "space_not_frozen")
            await spoke_audit.require_recorded(conn, "space", space)
            done = await rows.set_frozen(conn, req.space_id, frozen)
            return Effect([req.space_id], done["revision"])
        return await mutate_in(svc, caller, "memory.spaces." + ("freeze" if frozen else
                                                               "unfreeze"), req, key, effect)
    return run


def _stale(what: str, name: object, revision: int, expected: int) -> ConflictError:
    return ConflictError(f"{what} {name} is at revision {revision}, not {expected}: read it "
                         "again and retry on the current revision", code="revision_conflict",
                         revision=revision, expected_revision=expected)


async def mutate_in(svc: Services, caller: Caller, op: str, req: rq.InSpace, key: str | None,
                  effect: EffectFn) -> Wire:
    return await mutate(svc, caller, op=op, space_id=req.space_id,
                        request=req.model_dump(mode="json"), key=key, effect=effect)


async def subjects_ensure(svc: Services, caller: Caller, req: rq.SubjectEnsure,
                          key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("records_write", req.subject_id))
        await gate.writable_space(conn, caller, req.space_id)
        row, created = await rows.ensure_subject(conn, req.space_id, req.subject_id, req.kind)
        if not created:  # re-recorded as found
            await spoke_audit.require_recorded(conn, "subject", row)
        if req.kind is not None and row["kind"] not in (None, req.kind):
            raise ConflictError(f"subject {req.subject_id!r} exists with kind {row['kind']!r}",
                                code="subject_kind_mismatch", kind=row["kind"])
        return Effect([req.subject_id], row["revision"])
    return await mutate_in(svc, caller, "memory.subjects.ensure", req, key, effect)


async def subjects_get(svc: Services, caller: Caller, req: rq.SubjectRef,
                       key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("records_read", req.subject_id))
        await gate.existing_space(conn, req.space_id)
        return rendered_one(await gate.existing_subject(conn, req.space_id, req.subject_id),
                            subject_view, key="subject_id")


async def subjects_fence(svc: Services, caller: Caller, req: rq.SubjectFence,
                         key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(Want("admin", req.subject_id))
        await gate.writable_space(conn, caller, req.space_id)
        row = await gate.existing_subject(conn, req.space_id, req.subject_id, lock=True)
        state, fenced = _fenced(row, req)
        await spoke_audit.require_recorded(conn, "subject", row)
        done = await rows.set_subject(conn, req.space_id, req.subject_id, state=state,
                                      fenced=fenced)
        return Effect([req.subject_id], done["revision"])
    return await mutate_in(svc, caller, "memory.subjects.fence", req, key, effect)


def _fenced(row: dict[str, Any], req: rq.SubjectFence) -> tuple[str, list[str]]:
    state, fenced = row["state"], list(row["fenced_context_ids"])
    if state == "archived":
        raise ConflictError(f"subject {req.subject_id!r} is archived (terminal)",
                            code="subject_archived")
    if req.action in ("fence_context", "unfence_context"):
        if req.context_id is None:
            raise InvalidInputError(f"{req.action} names a context_id", field="context_id")
        if req.action == "fence_context":
            return state, sorted({*fenced, req.context_id})
        return state, [c for c in fenced if c != req.context_id]
    if req.context_id is not None:
        raise InvalidInputError(f"{req.action} takes no context_id", field="context_id")
    return {"fence": "fenced", "unfence": "active", "archive": "archived"}[req.action], fenced


async def grants_list(svc: Services, caller: Caller, req: rq.GrantsList,
                      key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        standing = await gate.access(conn, caller, req.space_id)
        await gate.existing_space(conn, req.space_id)
        if req.view == "admin":  # who may read what: an audit read of the space (ADR 0083)
            require_scope(caller, "audit.read", req.space_id)
            standing.require(Want("admin"))
            return rq.GrantList(grants=[grant_view(r) for r in await rows.grants(
                conn, req.space_id)])
        return rq.GrantList(grants=list(standing.grants))


async def grants_grant(svc: Services, caller: Caller, req: rq.GrantIssue,
                       key: str | None) -> Wire:
    now = datetime.now(UTC)
    if req.expires_at is not None and req.expires_at <= now:
        raise InvalidInputError("expires_at is in the past", field="expires_at")

    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        standing = await gate.access(conn, caller, req.space_id)
        await gate.writable_space(conn, caller, req.space_id)
        new = MemoryGrant(grant_id=uuid.uuid4(), issued_by=caller.agent_id, created_at=now,
                          **req.model_dump())
        parent = None if standing.authority else parent_of(standing.grants, new, now)
        if not standing.authority and parent is None:
            raise gate.amplification(caller.agent_id)
        if parent is not None:  # it authorizes the new grant: as its record left it
            found = await rows.grant(conn, req.space_id, parent.grant_id)
            if found is not None:
                await spoke_audit.require_recorded(conn, "grant", found)
        row = await rows.insert_grant(conn, {**new.model_dump(exclude={
            "created_at", "revoked_at", "schema_version", "extensions"}),
            "derived_from": None if parent is None else parent.grant_id})
        await rows.bump_space(conn, req.space_id)
        return Effect([str(row["grant_id"])])
    return await mutate_in(svc, caller, "memory.grants.grant", req, key, effect)


async def grants_revoke(svc: Services, caller: Caller, req: rq.GrantRevoke,
                        key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        standing = await gate.access(conn, caller, req.space_id)
        await gate.writable_space(conn, caller, req.space_id)
        row = await rows.grant(conn, req.space_id, req.grant_id, lock=True)
        if row is None:
            raise NotFoundError(f"grant {req.grant_id} does not exist in this space",
                                code="grant_not_found")
        if row["issued_by"] != caller.agent_id:
            standing.require(Want("admin"))
        if row["revoked_at"] is not None:
            raise ConflictError(f"grant {req.grant_id} is already revoked (terminal)",
                                code="grant_revoked")
        await spoke_audit.require_recorded(conn, "grant", row)
        revoked = await rows.revoke(conn, req.grant_id)  # with its derived grants (ADR 0082)
        for derived in revoked[1:]:  # each was live (the revocation's only change) before
            found = await rows.grant(conn, req.space_id, derived)
            if found is not None:
                await spoke_audit.require_recorded(conn, "grant", {**found, "revoked_at": None})
        await rows.bump_space(conn, req.space_id)
        return Effect([str(g) for g in revoked])
    return await mutate_in(svc, caller, "memory.grants.revoke", req, key, effect)


async def records_create(svc: Services, caller: Caller, req: rq.RecordCreate,
                         key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("records_write", req.subject_id, req.placement))
        await gate.writable_space(conn, caller, req.space_id)
        memory = await insert_record(svc, conn, caller, NewRecord(
            req.space_id, req.subject_id, req.kind, req.content, req.placement,
            req.source_context_id))
        return Effect([str(memory.id)], memory.revision, written=(memory,))
    return await mutate_in(svc, caller, "memory.records.create", req, key, effect)


@dataclass(frozen=True)
class NewRecord:
    """A record to write: where, about whom, what, and where it came from."""

    space_id: str
    subject_id: str
    kind: str | None
    content: Content
    placement: Placement
    source_context_id: str | None
    candidate_id: uuid.UUID | None = None


async def insert_record(svc: Services, conn: Conn, caller: Caller,
                        new: NewRecord) -> memory_rows.Memory:
    """A record's memory row, side row and chain record, in the caller's transaction
    (authorization and freeze checked by the caller). Every path that writes a record comes
    here, so the subject's fences are checked here (:func:`.access.open_subject`)."""
    await gate.open_subject(conn, new.space_id, new.subject_id, new.placement)
    memory = await memory_rows.insert(
        conn, namespace=new.space_id, title="", content=new.content.text, tags=[],
        metadata={}, author=caller.agent_id, memory_id=uuid.uuid4(),
        by=write_records.written_by(caller))
    present = new.content.wire()
    await rows.insert_record(conn, {
        "memory_id": memory.id, "space_id": new.space_id, "subject_id": new.subject_id,
        "kind": new.kind, "context_id": new.placement.context_id,
        "source_context_id": new.source_context_id, "captured_by": caller.agent_id,
        "candidate_id": new.candidate_id, "structured": present.get("structured"),
        "cognition": present.get("cognition")})
    await check_cap(svc, conn, caller, adds=len(new.space_id.encode()) + len(
        new.content.text.encode()))
    await write_records.record_memory(svc, conn, caller, "memory.stored", memory, None)
    return memory


async def check_cap(svc: Services, conn: Conn, caller: Caller, *, adds: int) -> None:
    """The author's storage quota, exact: read on the usage row the write's trigger just
    updated and locked (ADR 0017), so a record counts like any memory (413 past the cap)."""
    cap = settling.Cap(caller.agent_id, svc.policy.storage_limit(caller.agent_id))
    await settling.check_cap(conn, settling.Settlement(cap=cap), adds=adds)


async def _record(conn: Conn, caller: Caller, req: rq.RecordRef, capability: Capability, *,
                  lock: bool = False) -> dict[str, Any]:
    """The record, re-authorized for ``capability`` at its subject and placement (404 for a
    record the caller may not see, so ids leak nothing)."""
    standing = await gate.access(conn, caller, req.space_id)
    row = await rows.record(conn, req.space_id, req.record_id, lock=lock)
    return _authorized(standing, req, row, capability)


def _authorized(standing: gate.Access, req: rq.RecordRef, row: dict[str, Any] | None,
                capability: Capability) -> dict[str, Any]:
    if row is None:
        raise NotFoundError(f"record {req.record_id} does not exist in this space",
                            code="record_not_found")
    placement = Placement(shared=True) if row["context_id"] is None else Placement(
        context_id=row["context_id"])
    if not standing.allows(Want("records_read", row["subject_id"], placement)):
        raise NotFoundError(f"record {req.record_id} does not exist in this space",
                            code="record_not_found")
    standing.require(Want(capability, row["subject_id"], placement))
    return row


async def records_get(svc: Services, caller: Caller, req: rq.RecordRead,
                      key: str | None) -> Wire:
    """One record: the row and the caller's grants in one statement, then the grant check;
    its receipt when asked (ADR 0104)."""
    async with svc.db.connection() as conn:
        row = await rows.record_and_grants(conn, req.space_id, req.record_id,
                                           caller.agent_id)
    standing = gate.held(caller, req.space_id, [] if row is None else row.pop("grants"))
    found = _authorized(standing, req, row, "records_read")
    view = rendered_one(found, record_view, key="memory_id")
    proofs = await record_proofs.record_receipts(svc, [found]) if req.receipts else None
    return rq.RecordAnswer.model_validate({**dict(view), "receipts": proofs})


async def records_update(svc: Services, caller: Caller, req: rq.RecordUpdate,
                         key: str | None) -> Wire:
    if req.content is None and req.kind is None:
        raise InvalidInputError("an update changes content or kind", field="content")

    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        row = await writable_record(conn, caller, req, req.expected_revision)
        current = await memory_rows.get(conn, req.record_id, for_update=True)
        await write_records.require_recorded_memory(conn, current)
        content = req.content.wire() if req.content is not None else None
        memory = await memory_rows.update(conn, current, changes={} if content is None else {
            "content": content["text"]}, expected_revision=req.expected_revision)
        await check_cap(svc, conn, caller, adds=len(memory.content.encode()))
        await rows.set_record(
            conn, req.record_id, kind=req.kind if req.kind is not None else row["kind"],
            structured=row["structured"] if content is None else content.get("structured"),
            cognition=row["cognition"] if content is None else content.get("cognition"))
        await write_records.record_memory(svc, conn, caller, "memory.updated", memory, None)
        return Effect([str(memory.id)], memory.revision, written=(memory,))
    return await mutate_in(svc, caller, "memory.records.update", req, key, effect)


async def writable_record(conn: Conn, caller: Caller, req: rq.RecordRef,
                           expected: int) -> dict[str, Any]:
    await gate.writable_space(conn, caller, req.space_id)
    row = await _record(conn, caller, req, "records_write", lock=True)
    placement = Placement(shared=True) if row["context_id"] is None else Placement(
        context_id=row["context_id"])
    gate.writable_subject(await gate.existing_subject(conn, req.space_id, row["subject_id"]),
                          placement)
    if row["deleted_at"] is not None:
        raise ConflictError(f"record {req.record_id} is deleted (a tombstone)",
                            code="record_deleted")
    if row["revision"] != expected:
        raise _stale("record", req.record_id, row["revision"], expected)
    await spoke_audit.require_recorded(conn, "record", row)  # its op re-records the row
    return row


async def records_delete(svc: Services, caller: Caller, req: rq.RecordDelete,
                         key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        await writable_record(conn, caller, req, req.expected_revision)
        current = await memory_rows.get(conn, req.record_id, for_update=True)
        await write_records.require_recorded_memory(conn, current)
        memory = await memory_rows.tombstone(conn, current)
        await rows.set_record(conn, req.record_id, kind=None, structured=None, cognition=None)
        await write_records.record_memory(svc, conn, caller, "memory.deleted", memory, None)
        return Effect([str(memory.id)], memory.revision)
    return await mutate_in(svc, caller, "memory.records.delete", req, key, effect)


async def receipts_get(svc: Services, caller: Caller, req: rq.ReceiptRef,
                       key: str | None) -> Wire:
    """A receipt of the caller's own (or any, for the space authority)."""
    async with svc.db.connection() as conn:
        row = await rows.receipt(conn, req.space_id, req.receipt_id)
    if row is None or (row["principal"] != caller.agent_id
                       and not gate.authority(caller, req.space_id)):
        raise NotFoundError(f"receipt {req.receipt_id} does not exist in this space",
                            code="receipt_not_found")
    if row["principal"] != caller.agent_id:  # another's outcome: an audit read (ADR 0083)
        require_scope(caller, "audit.read", req.space_id)
    return receipt_view(row)


freeze = _freezing(True)
unfreeze = _freezing(False)
