"""Verifying the audit chain for ``GET /v1/audit/verify`` (the CLI does the same offline),
through the operation pipeline (scope ``audit.read``); ``?deep=true`` adds the sweep of rows
against write records (:mod:`~attested_cortex.attest.sweeping`).

A verification costs a walk of the whole chain (and, deep, of every row), so one server runs
at most one of each kind at a time (docs/adr/0019): a request that arrives while one runs
waits for it and gets its report, instead of starting another. Forty concurrent deep
verifies used to take forty connections and forty walks, and starved every other request.
Authentication and scopes are still checked per request (the pipeline runs before
:meth:`VerifyChainCall.execute`); only the walk is shared.

A qualified ``audit.read`` (``audit.read:public/**``) covers some namespaces, not the
cortex (issue 37, ADR 0081): its holder gets the chain summary only (:func:`summary`: whether
the chain holds, its length and head, no fault detail), and ``deep`` (every row of every
namespace, named by id) needs ``audit.read`` unqualified.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client import CollectorRegistry, Counter

from attested_cortex.attest.auditing import verify_chain
from attested_cortex.attest.sweeping import sweep
from attested_cortex.bundles.importing import with_completeness
from attested_cortex.service.pipeline import attesting
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deciding import require_bare
from attested_cortex.service.pipeline.running import Call, run
from attested_cortex.store import checkpoints
from attested_cortex.store.database import Database

Report = dict[str, Any]
#: The verification running now on each server's database, by kind (deep or not).
_RUNNING: WeakKeyDictionary[Database, dict[bool, asyncio.Task[Report]]] = WeakKeyDictionary()
#: ``cortex_audit_verifications_total`` of each server's registry (the chart's
#: CortexAuditVerificationFailing alert reads it): one count per walk, not per waiter.
_COUNTED: WeakKeyDictionary[CollectorRegistry, Counter] = WeakKeyDictionary()


@dataclass
class VerifyChainCall(Call[dict[str, Any]]):
    """Walk every event: hashes always, signatures of agents the keyring knows; with
    ``deep``, also every memory and link row against its latest write record (``ok`` then
    holds only when both hold)."""

    spec = ops.AUDIT_VERIFY
    deep: bool = False

    async def execute(self, svc: Services, caller: Caller) -> Report:
        if self.deep:
            require_bare(caller, "audit.read", "a deep audit")
        report = await shared(svc, deep=self.deep)
        if not caller.scopes.holds("audit.read"):
            return summary(report)
        return copy.deepcopy(report)


#: What a qualified ``audit.read`` holder is told of the chain.
_SUMMARY = ("ok", "events", "first_bad_sequence", "head_hash", "signatures_checked",
            "unverified")


def summary(report: Report) -> Report:
    """The chain summary of ``report``: no reason text, no keyed fault list."""
    found = {name: report[name] for name in _SUMMARY}
    found["keyed"] = {"checked": report["keyed"]["checked"], "ok": report["keyed"]["ok"]}
    found["summary_only"] = True
    return found


async def shared(svc: Services, *, deep: bool) -> Report:
    """The report of the verification of this kind running now, or of a new one. A waiter
    that goes away (a client that disconnects) does not cancel it for the others."""
    running = _RUNNING.setdefault(svc.db, {})
    task = running.get(deep)
    if task is None:
        task = asyncio.create_task(_verify(svc, deep=deep), name=f"audit-verify-deep={deep}")
        running[deep] = task
        task.add_done_callback(lambda done: _finished(running, deep, done))
    return await asyncio.shield(task)


def _finished(running: dict[bool, asyncio.Task[Report]], deep: bool,
              task: asyncio.Task[Report]) -> None:
    """Forget a finished run (the next request starts a fresh one); its error is its
    waiters' (retrieved here too, for a run every waiter left)."""
    if running.get(deep) is task:
        del running[deep]
    if not task.cancelled():
        task.exception()


async def _verify(svc: Services, *, deep: bool) -> Report:
    try:
        report = await _walk(svc, deep=deep)
    except Exception:
        _count(svc.metrics_registry, deep=deep, result="error")
        raise
    _count(svc.metrics_registry, deep=deep, result="ok" if report["ok"] else "failed")
    return report


def counter(registry: CollectorRegistry | None) -> Counter | None:
    """``cortex_audit_verifications_total`` on ``registry`` (one per registry; the server
    registers it at start so that it is on ``/metrics`` before the first verification)."""
    if registry is None:
        return None
    found = _COUNTED.get(registry)
    if found is None:
        found = _COUNTED[registry] = Counter(
            "cortex_audit_verifications", "Audit chain verifications, by depth and result",
            ["deep", "result"], registry=registry)
    return found


def _count(registry: CollectorRegistry | None, *, deep: bool, result: str) -> None:
    found = counter(registry)
    if found is not None:
        found.labels(str(deep).lower(), result).inc()


async def _walk(svc: Services, *, deep: bool) -> Report:
    keyring = attesting.snapshot(svc.keys).keyring
    distrusted: set[int] = set()
    async with svc.db.connection() as conn:
        report = dataclasses.asdict(await verify_chain(
            conn, keyring=keyring, master=svc.key_ring, distrusted=distrusted,
            checkpoints=await checkpoints.roots(conn)))
        await conn.rollback()
        if deep:
            swept = await with_completeness(conn, (await sweep(conn, distrusted)).as_json())
            report["deep"] = swept
            report["ok"] = bool(report["ok"] and swept["ok"])
    return report


async def verify(svc: Services, caller: Caller, *, deep: bool = False) -> dict[str, Any]:
    """The chain report (``deep``: with the row sweep)."""
    return await run(svc, caller, VerifyChainCall(deep))
