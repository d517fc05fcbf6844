"""The operation pipeline: every operation runs the same declared steps, in one place.

    authenticate (and the rate quota) -> scope -> rules -> pre_hooks -> quota (storage)
        -> approval gate -> operation -> post_hooks -> audit

An operation is a :class:`Call` (its request, how to find its target, its hook payloads and
its execution) whose class carries an :class:`~.operations.OperationSpec` (name, event class,
hook events, required scope, rule operation, restricted or not). :func:`run` is the only
caller of an operation's ``execute``; the service functions the routes call build a Call and
hand it here, so a check added to a step holds for every operation and every entry point.
``tests/server/test_pipeline.py`` enumerates the routes and proves each one passes every step.
The steps live in :mod:`.calls` (values), :mod:`.deciding` (scope, rules, read isolation)
and :mod:`.hook_steps` (hooks and the approval gate).

Decisions: the scope step refuses (403) what the agent's scopes do not grant, before any
rule. The rules step merges the rule walk (:mod:`attested_cortex.policy.rules`) with
ownership (only the author updates or deletes, only the observer invalidates, unless a scope
or a rule naming the agent grants more) into one Decision; hook chains add theirs and the
strictest wins. The permission mode is applied once, in :func:`.deciding.enforce`:
``enforce`` blocks Deny (403) and holds AskUser for approval; ``advisory`` lets rule
decisions through, logging and counting each would-be denial; ``off`` skips rule evaluation.
Hooks and ownership are explicit constraints and hold in every mode (ADR 0009). The audit
step runs whatever the operation's outcome.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Final

from attested_cortex.errors import CortexError, QuotaExceededError
from attested_cortex.service.pipeline import recording
from attested_cortex.service.pipeline.calls import STEPS, Call, Outcome, R, Step, Target
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deadlines import write_deadline
from attested_cortex.service.pipeline.deciding import check_scope, enforce, recheck, rules, visible
from attested_cortex.service.pipeline.hook_steps import gate, post_hooks, pre_hooks
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.service.pipeline.settling import Cap, Settlement

__all__ = ["STEPS", "Call", "Outcome", "Step", "Target", "run", "take_rate", "visible"]
log = logging.getLogger(__name__)
#: The event classes whose operation writes: its database work has the write deadline.
WRITE_CLASSES: Final = frozenset({"write", "transcript"})


async def run(svc: Services, caller: Caller, call: Call[R]) -> R:
    """Run ``call`` through every step; raises the domain error a step decided on."""
    spec, outcome = call.spec, Outcome()
    try:
        _step(svc, spec, "authenticate")
        if not caller.rated:  # the HTTP layer took it before reading the body
            take_rate(svc, caller)  # before any database or CPU work the request asks for
        target = outcome.target = await call.target(svc, caller)
        _step(svc, spec, "scope")
        check_scope(spec, caller, target)
        _step(svc, spec, "rules")
        enforce(svc, spec, outcome, rules(svc, spec, caller, target, call))
        _step(svc, spec, "pre_hooks")
        await pre_hooks(svc, spec, caller, call, target, outcome)
        if outcome.modified:  # a hook may have moved the request: check where it goes now
            target = await call.target(svc, caller)
            check_scope(spec, caller, target)
            recheck(svc, spec, outcome, rules(svc, spec, caller, target, call))
        _step(svc, spec, "quota")
        cap = await _storage(svc, caller, call, target, outcome)
        await gate(svc, spec, caller, call, target, outcome)
        _step(svc, spec, "operation")
        acting = replace(caller, allowed=outcome.summary())  # a write records it (ADR 0124)
        if spec.event_class in WRITE_CLASSES:  # a commit must not wait without a bound
            async with write_deadline(svc.limits.write_timeout_ms):
                result = await _execute(svc, acting, call, outcome, cap)
        else:
            result = await _execute(svc, acting, call, outcome, cap)
        _step(svc, spec, "post_hooks")
        result = outcome.result = await post_hooks(svc, spec, caller, call, target, result,
                                                   outcome)
        return result
    except CortexError as exc:
        outcome.error = exc
        raise
    finally:
        _step(svc, spec, "audit")
        try:
            await recording.audit(svc, caller, spec, outcome, call)
        except Exception:  # the operation's answer stands; a lost record is logged loudly
            log.exception("the audit step failed", extra={"operation": spec.name})


def _step(svc: Services, spec: OperationSpec, step: Step) -> None:
    if svc.observe is not None:
        svc.observe(spec.name, step)


def take_rate(svc: Services, caller: Caller) -> None:
    """The request-rate quota, the first check of every request (429 with Retry-After): the
    HTTP middleware calls it right after authentication, :func:`run` for other callers."""
    buckets = svc.policy.buckets
    if buckets is None:
        return
    wait = buckets.take(caller.agent_id, now=time.monotonic())
    if wait:
        raise QuotaExceededError(
            f"agent {caller.agent_id} exceeded {buckets.rate_of(caller.agent_id):g} "
            "requests per second", retry_after=wait, limit="requests_per_second")


async def _storage(svc: Services, caller: Caller, call: Call[R], target: Target,
                   outcome: Outcome) -> Cap | None:
    """The storage quota of a growing write: the cap its transaction checks, exactly, on the
    usage row it locks (:mod:`.settling`); and, when an approval gate lies ahead, refused
    early (413) so that no over-quota write is held for a human. A write that settles its
    own cap is not looked at first otherwise: the early read cost a round trip per write
    (a quarter of a plain store's time, docs/PERFORMANCE.md) and refused nothing the
    transaction does not refuse with the same answer."""
    if target.adds_bytes <= 0:
        return None
    owner = target.owner or caller.agent_id
    cap = Cap(owner, svc.policy.storage_limit(owner))
    if call.settles and outcome.ask is None:
        return cap
    from attested_cortex.service.pipeline import usage  # the store query, only for writes

    await usage.check_storage(svc, cap, target.adds_bytes)
    return cap


async def _execute(svc: Services, caller: Caller, call: Call[R], outcome: Outcome,
                   cap: Cap | None) -> R:
    """The operation, settling its approval and cap in its transaction when it can (an
    approval is spent exactly when the write commits), else spending the approval first and
    releasing it when the operation fails (a call that does not settle writes nothing)."""
    if call.settles:
        call.settlement = Settlement(outcome.approved, cap, caller.claim)
        return await call.execute(svc, caller)
    approvals = svc.approvals  # an approved request passed the gate, which had them
    if outcome.approved is not None and approvals is not None:
        outcome.consumed = await approvals.spend(outcome.approved)
    try:
        return await call.execute(svc, caller)
    except CortexError:
        if outcome.consumed is not None and approvals is not None:
            await approvals.release(outcome.consumed)  # nothing was written: still usable
        raise
