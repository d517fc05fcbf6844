"""Reflections of the spoke-memory family (flag ``spoke-memory-reflection``):
``memory.reflections.state``, ``.list`` and ``.generate``. Called by :mod:`.dispatch`.

Every request needs ``reflections`` for the subject. The basis is computed from what the
caller is authorized for *now* (the subject's live records its ``reflections`` and
``records_read`` grants both cover at their placements, and the subject's profile
revisions); a stored reflection is listed only to a caller who reads every record of its
basis now (ADR 0082: a derived row inherits the coverage of what it was derived from). So
``stale`` is read-time: a stored reflection is stale when its digest differs from the
current basis's. Generation is admitted only when the provider's required profile kinds
exist (none by default: ``memory.describe`` says so) and at least one record is in the
basis. Without a reflection endpoint it runs the deterministic engine of
:mod:`attested_cortex.spoke.reflecting` and commits at once; with one (ADR 0069) the
receipt answers ``pending``, the pinned basis is left for the background worker
(:mod:`attested_cortex.service.workers.pending_receipts`) in the same transaction, and
``memory.receipts.get`` later reads it ``committed`` (``refs``: the reflection) or
``failed``. The engine's policy identity is part of every basis, so the digests of
``state`` and ``list`` follow the engine this server runs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from attested_cortex.embedding.chat import ChatError
from attested_cortex.errors import ConflictError
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke.ops import mutate_in
from attested_cortex.service.resources.spoke.reading import placement_of
from attested_cortex.service.resources.spoke.receipts import Effect
from attested_cortex.service.workers.pending_receipts import Handler, Outcome, Reflector
from attested_cortex.spoke import reflecting
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want
from attested_cortex.spoke.models import Reflection, ReflectionBasis, Wire
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import candidates as listing
from attested_cortex.store.spoke import memory as rows
from attested_cortex.store.spoke import pending as pending


def _reflector(svc: Services) -> Reflector | None:
    return None if svc.pending is None else svc.pending.reflector


def engine_policy(svc: Services) -> str:
    """The policy identity of the engine this server generates with."""
    found = _reflector(svc)
    return reflecting.ENGINE_POLICY if found is None else found.policy


async def _basis(svc: Services, conn: Conn, standing: gate.Access,
                 req: rq.ReflectionsRequest) -> tuple[ReflectionBasis, list[Any], dict[str, str]]:
    standing.require(Want("reflections", req.subject_id))
    await gate.existing_subject(conn, req.space_id, req.subject_id)
    keys = [r for r in await listing.record_keys(conn, req.space_id, req.subject_id)
            if standing.reads("reflections", r["subject_id"], placement_of(r))]
    profiles = await listing.profiles(conn, req.space_id, req.subject_id)
    basis = reflecting.basis_of([(r["memory_id"], r["revision"]) for r in keys],
                                {p["kind"]: p["revision"] for p in profiles},
                                engine_policy(svc))
    return basis, keys, {p["kind"]: p["text"] for p in profiles}


def _missing(profiles: dict[str, str]) -> list[str]:
    return [kind for kind in reflecting.REQUIRED_PROFILE_KINDS if kind not in profiles]


async def state(svc: Services, caller: Caller, req: rq.ReflectionsRequest,
                key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        basis, keys, profiles = await _basis(
            svc, conn, await gate.access(conn, caller, req.space_id), req)
        stored = await listing.reflections(conn, req.space_id, req.subject_id)
    current = reflecting.digest(basis)
    return rq.ReflectionState(
        state_digest=current, stale=not stored or stored[0]["state_digest"] != current,
        data_sufficient=bool(keys), missing_required_kinds=_missing(profiles))


async def listed(svc: Services, caller: Caller, req: rq.ReflectionsRequest,
                 key: str | None) -> Wire:
    """The stored reflections whose every basis record the caller reads now (a reflection
    inherits the coverage of what it was derived from, ADR 0082)."""
    async with svc.db.connection() as conn:
        standing = await gate.access(conn, caller, req.space_id)
        basis, _, _ = await _basis(svc, conn, standing, req)
        stored = await listing.reflections(conn, req.space_id, req.subject_id)
        placed = await listing.placements(conn, req.space_id, [
            uuid.UUID(str(ref["record_id"])) for r in stored for ref in r["basis"]["records"]])
    current = reflecting.digest(basis)
    stored = [r for r in stored if _derived_readable(standing, r, placed)]
    return rq.ReflectionList(reflections=[Reflection(
        reflection_id=r["reflection_id"], space_id=r["space_id"], subject_id=r["subject_id"],
        text=r["text"], basis=ReflectionBasis(**r["basis"]), state_digest=r["state_digest"],
        stale=r["state_digest"] != current, created_at=r["created_at"],
        schema_version=r["schema_version"], extensions=r["extensions"]) for r in stored])


def _derived_readable(standing: gate.Access, stored: dict[str, Any],
                      placed: dict[uuid.UUID, dict[str, Any]]) -> bool:
    """Whether ``standing`` reads every record ``stored`` was derived from (one gone: no)."""
    for ref in stored["basis"]["records"]:
        row = placed.get(uuid.UUID(str(ref["record_id"])))
        if row is None or not standing.reads("reflections", row["subject_id"],
                                             placement_of(row)):
            return False
    return True


async def generate(svc: Services, caller: Caller, req: rq.ReflectionsRequest,
                   key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        basis, keys, profiles = await _basis(
            svc, conn, await gate.access(conn, caller, req.space_id), req)
        await gate.writable_space(conn, caller, req.space_id)
        missing = _missing(profiles)
        if missing:
            raise ConflictError(f"generation needs the profile kinds {missing}; write them "
                                "with memory.profile.update", code="required_profile_missing",
                                missing_required_kinds=missing)
        if not keys:
            raise ConflictError("no record of this subject is in your basis: nothing to "
                                "reflect on", code="insufficient_data")
        if _reflector(svc) is not None:  # the endpoint engine: the worker generates
            await pending.enqueue(conn, receipt_id=receipt, kind="reflection",
                                  space_id=req.space_id, principal=caller.agent_id,
                                  payload={"subject_id": req.subject_id,
                                           "basis": basis.model_dump(mode="json")})
            return Effect(status="pending")
        texts = [r["text"] for r in await rows.records_by_id(
            conn, req.space_id, [k["memory_id"] for k in keys])]
        reflection_id = uuid.uuid4()
        await listing.insert_reflection(conn, {
            "reflection_id": reflection_id, "space_id": req.space_id,
            "subject_id": req.subject_id, "created_by": caller.agent_id,
            "text": reflecting.synthesize(req.subject_id, profiles, texts),
            "basis": basis.model_dump(mode="json"), "state_digest": reflecting.digest(basis)})
        return Effect([str(reflection_id)])
    answer = await mutate_in(svc, caller, "memory.reflections.generate", req, key, effect)
    if svc.pending is not None:
        svc.pending.wake()
    return answer


def reflection_job(reflector: Reflector) -> Handler:
    """The pending worker's handler of a reflection job: re-read the pinned basis (a record
    or profile whose revision moved, or a record deleted, fails it ``basis_changed``: the
    client generates again), call the endpoint (a timeout or an error fails it with the
    client's code and a short reason), store the reflection with the basis's digest and
    record the cost (the endpoint's token usage and the time taken) on the receipt."""

    async def run(conn: Conn, work: dict[str, Any]) -> Outcome:
        space_id, subject_id = work["space_id"], work["payload"]["subject_id"]
        basis = ReflectionBasis(**work["payload"]["basis"])
        pinned = {r.record_id: r.revision for r in basis.records}
        found = await rows.records_by_id(conn, space_id, list(pinned))
        profiles = {p["kind"]: p for p in await listing.profiles(conn, space_id, subject_id)}
        moved = (len(found) != len(pinned)
                 or any(r["deleted_at"] is not None or r["revision"] != pinned[r["memory_id"]]
                        for r in found)
                 or {k: p["revision"] for k, p in profiles.items()} != basis.profile_revisions)
        if moved:
            return Outcome.failed("basis_changed", "a record or profile of the pinned basis "
                                  "changed before generation ran; generate again")
        ordered = sorted(found, key=lambda r: (r["created_at"], str(r["memory_id"])))
        messages = reflecting.prompt(subject_id, {k: p["text"] for k, p in profiles.items()},
                                     [r["text"] for r in ordered])
        started = time.monotonic()
        try:
            answer = await reflector.client.complete(messages, timeout_s=reflector.timeout_s)
        except ChatError as exc:
            return Outcome.failed(exc.code, str(exc))
        cost = {"model": answer.model, "usage": answer.usage,
                "elapsed_ms": round((time.monotonic() - started) * 1000)}
        reflection_id = uuid.uuid4()
        await listing.insert_reflection(conn, {
            "reflection_id": reflection_id, "space_id": space_id, "subject_id": subject_id,
            "created_by": work["principal"], "text": reflecting.bounded(answer.text),
            "basis": basis.model_dump(mode="json"), "state_digest": reflecting.digest(basis)})
        return Outcome("committed", [str(reflection_id)], extensions={"cost": cost})
    return run
