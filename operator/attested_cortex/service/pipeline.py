"""The operation pipeline: every operation runs the same declared steps, in one place.

    authenticate -> scope -> rules -> pre_hooks -> quota -> operation -> post_hooks -> audit

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

from attested_cortex.errors import CortexError, QuotaExceededError
from attested_cortex.service import recording
from attested_cortex.service.calls import STEPS, Call, Outcome, R, Step, Target
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.deciding import check_scope, enforce, recheck, rules, visible
from attested_cortex.service.hook_steps import gate, post_hooks, pre_hooks
from attested_cortex.service.operations import OperationSpec

__all__ = ["STEPS", "Call", "Outcome", "Step", "Target", "run", "visible"]
log = logging.getLogger(__name__)


async def run(svc: Services, caller: Caller, call: Call[R]) -> R:
    """Run ``call`` through every step; raises the domain error a step decided on."""
    spec, outcome = call.spec, Outcome()
    try:
        _step(svc, spec, "authenticate")
        target = await call.target(svc, caller)
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
        await gate(svc, spec, caller, call, target, outcome)
        _step(svc, spec, "quota")
        await _quota(svc, spec, caller, target)
        _step(svc, spec, "operation")
        try:
            result = await call.execute(svc, caller)
        except CortexError:
            if outcome.consumed is not None:  # nothing was written: the approval stays usable
                await svc.approvals.release(outcome.consumed)
            raise
        _step(svc, spec, "post_hooks")
        await post_hooks(svc, spec, caller, call, target, result, outcome)
        return result
    except CortexError as exc:
        outcome.error = exc
        raise
    finally:
        _step(svc, spec, "audit")
        try:
            await recording.audit(svc, caller, spec, outcome)
        except Exception:  # the operation's answer stands; a lost record is logged loudly
            log.exception("the audit step failed", extra={"operation": spec.name})


def _step(svc: Services, spec: OperationSpec, step: Step) -> None:
    if svc.observe is not None:
        svc.observe(spec.name, step)


async def _quota(svc: Services, spec: OperationSpec, caller: Caller, target: Target) -> None:
    policy = svc.policy
    if policy.buckets is not None:
        wait = policy.buckets.take(caller.agent_id, now=time.monotonic())
        if wait:
            raise QuotaExceededError(
                f"agent {caller.agent_id} exceeded "
                f"{policy.buckets.rate_of(caller.agent_id):g} requests per second",
                retry_after=wait, limit="requests_per_second")
    if target.adds_bytes > 0:
        from attested_cortex.service import usage  # the store query, only for writes

        await usage.check_storage(svc, caller, target.adds_bytes)
