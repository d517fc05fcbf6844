"""The operation pipeline: every operation runs the same declared steps, in one place.

    authenticate -> scope -> rules -> pre_hooks -> quota -> operation -> post_hooks -> audit

An operation is a :class:`Call` (its request, how to find its target, its hook payloads and
its execution) whose class carries an :class:`~.operations.OperationSpec` (name, event class,
hook events, required scope, rule operation, restricted or not). :func:`run` is the only
caller of an operation's ``execute``; the service functions the routes call build a Call and
hand it here, so a check added to a step holds for every operation and every entry point.
``tests/server/test_pipeline.py`` enumerates the routes and proves each one passes every step.

Decisions: the scope step refuses (403) what the agent's scopes do not grant, before any
rule. The rules step merges the rule walk (:mod:`attested_cortex.policy.rules`) with
ownership (only the author updates or deletes, only the observer invalidates, unless a scope
or a rule naming the agent grants more) into one Decision; hook chains add theirs and the
strictest wins. The permission mode is applied once, in :func:`_enforce`: ``enforce`` blocks
Deny (403) and AskUser; ``advisory`` lets rule decisions through, logging and counting each
would-be denial; ``off`` skips rule evaluation. Hooks and ownership are explicit constraints
and hold in every mode (ADR 0009). The audit step runs whatever the operation's outcome.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar, get_args

from attested_cortex.errors import (
    CortexError,
    DeniedError,
    HeldForApprovalError,
    QuotaExceededError,
)
from attested_cortex.hooks.events import EventName
from attested_cortex.policy.decisions import ALLOW, Decision, strictest
from attested_cortex.service import recording
from attested_cortex.service.context import Caller, ChainOutcome, Services
from attested_cortex.service.operations import OperationSpec

log = logging.getLogger(__name__)
R = TypeVar("R")

Step = Literal[
    "authenticate", "scope", "rules", "pre_hooks", "quota", "operation", "post_hooks", "audit"
]
STEPS: Final[tuple[Step, ...]] = get_args(Step)


@dataclass(frozen=True)
class Target:
    """What an operation touches, found before it runs.

    ``namespaces``: the memory namespaces it reads or writes (a link: both ends; a listing
    or recall: the requested namespace, or none). ``owner``: the author or observer of the
    object it changes. ``adds_bytes``: what a write adds to its author's stored bytes.
    """

    namespaces: tuple[str, ...] = ()
    owner: str | None = None
    adds_bytes: int = 0


@dataclass
class Outcome:
    """What the pipeline decided, for the audit step."""

    decisions: list[Decision] = field(default_factory=list)
    advisory: list[Decision] = field(default_factory=list)
    error: CortexError | None = None
    post_denied: Decision | None = None
    ask: Decision | None = None  # an AskUser to settle at the approval gate (enforce)
    consumed: Any = None  # the approval this request spends
    modified: bool = False  # a pre- hook changed the request


class Call(Generic[R]):
    """One operation request. Subclasses set ``spec`` and override what they use."""

    spec: ClassVar[OperationSpec]

    async def target(self, svc: Services, caller: Caller) -> Target:
        """The namespaces and owner the operation touches (may read the database)."""
        return Target()

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        """The payload of a pre- event, built from the request as it is now."""
        raise NotImplementedError(event)

    def modified(self, event: EventName, payload: dict[str, Any]) -> None:
        """Take a pre- hook's (possibly modified) payload back into the request."""

    def check(self, svc: Services, caller: Caller, target: Target) -> Decision:
        """Operation-specific invariants of the rules step (e.g. retroactive invalidation)."""
        return ALLOW

    async def execute(self, svc: Services, caller: Caller) -> R:
        """The operation itself."""
        raise NotImplementedError

    def post_payload(self, event: EventName, result: R) -> dict[str, Any]:
        """The payload of a post- event."""
        raise NotImplementedError(event)

    def request(self) -> dict[str, Any]:
        """The request as JSON: what a held action shows and what its approval is bound to."""
        cmd = getattr(self, "cmd", None)
        found: dict[str, Any] = cmd.model_dump(mode="json") if cmd is not None else {}
        for name in ("memory_id", "link_id", "namespace", "limit"):
            if hasattr(self, name):
                found[name] = str(getattr(self, name))
        return found


async def run(svc: Services, caller: Caller, call: Call[R]) -> R:
    """Run ``call`` through every step; raises the domain error a step decided on."""
    spec, outcome = call.spec, Outcome()
    try:
        _step(svc, spec, "authenticate")
        target = await call.target(svc, caller)
        _step(svc, spec, "scope")
        _check_scope(spec, caller, target)
        _step(svc, spec, "rules")
        _enforce(svc, spec, outcome, _rules(svc, spec, caller, target, call))
        _step(svc, spec, "pre_hooks")
        await _pre_hooks(svc, spec, caller, call, target, outcome)
        if outcome.modified:  # a hook may have moved the request: check where it goes now
            target = await call.target(svc, caller)
            _check_scope(spec, caller, target)
            _enforce(svc, spec, outcome, _rules(svc, spec, caller, target, call))
        await _gate(svc, spec, caller, call, target, outcome)
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
        await _post_hooks(svc, spec, caller, call, target, result, outcome)
        return result
    except CortexError as exc:
        outcome.error = exc
        raise
    finally:
        _step(svc, spec, "audit")
        await recording.audit(svc, caller, spec, outcome)


def _step(svc: Services, spec: OperationSpec, step: Step) -> None:
    if svc.observe is not None:
        svc.observe(spec.name, step)


def _check_scope(spec: OperationSpec, caller: Caller, target: Target) -> None:
    if spec.scope is None:
        return
    wanted = target.namespaces or (None,)
    for namespace in wanted:
        if not caller.scopes.allows(spec.scope, namespace):
            where = f" in namespace {namespace!r}" if namespace else ""
            raise DeniedError(
                f"agent {caller.agent_id} lacks scope {spec.scope}{where}",
                code="scope_denied", decision="deny", scope=spec.scope, namespace=namespace,
                source="scope", reason=f"scope {spec.scope} not held",
            )


def _rules(
    svc: Services, spec: OperationSpec, caller: Caller, target: Target, call: Call[Any]
) -> tuple[Decision, Decision]:
    """(rule decision, ownership and invariant decision)."""
    invariant = strictest(_ownership(svc, spec, caller, target), call.check(svc, caller, target))
    if spec.rule_operation is None or svc.permission_mode == "off":
        return ALLOW, invariant
    default = svc.policy.write_default if spec.restricted else "allow"
    decisions = [
        svc.policy.rules.evaluate(agent_id=caller.agent_id, operation=spec.rule_operation,
                                  namespace=namespace).decision(default=default)
        for namespace in (target.namespaces or (None,))
    ]
    return strictest(*decisions), invariant


def _ownership(svc: Services, spec: OperationSpec, caller: Caller, target: Target) -> Decision:
    """Only the owner changes an object, unless ``memory.override`` or a rule naming the
    agent explicitly allows it."""
    if not spec.owner_only or target.owner is None or target.owner == caller.agent_id:
        return ALLOW
    namespaces = target.namespaces or (None,)
    if all(caller.scopes.allows("memory.override", ns) for ns in namespaces):
        return ALLOW
    if spec.rule_operation is not None and all(
        _named_allow(svc, spec.rule_operation, caller.agent_id, ns) for ns in namespaces
    ):
        return ALLOW
    return Decision("deny", "ownership",
                    f"only {target.owner} may {spec.rule_operation or spec.name} this object; "
                    "a memory.override scope or a rule naming the agent grants more",
                    "not_owner")


def _named_allow(svc: Services, operation: str, agent_id: str, namespace: str | None) -> bool:
    rule = svc.policy.rules.evaluate(agent_id=agent_id, operation=operation,
                                     namespace=namespace).rule
    return rule is not None and rule.verdict == "allow" and rule.names(agent_id)


def _enforce(
    svc: Services, spec: OperationSpec, outcome: Outcome, decided: tuple[Decision, Decision]
) -> None:
    """Apply the mode to the rule decision; invariants always hold."""
    rule, invariant = decided
    outcome.decisions.extend(d for d in decided if not d.allows)
    if not invariant.allows:
        raise _refusal(spec, invariant)
    if rule.allows:
        return
    if svc.permission_mode != "enforce":
        outcome.advisory.append(rule)
    elif rule.verdict == "ask_user":
        outcome.ask = rule  # settled at the approval gate, after the hooks (a Deny wins)
    else:
        raise _refusal(spec, rule)


def _refusal(spec: OperationSpec, decision: Decision) -> DeniedError:
    extra: dict[str, Any] = {}
    if decision.source.startswith("hook:"):
        extra = {"event": decision.source.removeprefix("hook:"),
                 "hook_code": decision.hook_code}
    if decision.verdict == "ask_user":
        return DeniedError(decision.reason or "this operation needs a human's approval",
                           code="approval_required", decision="ask_user",
                           source=decision.source, reason=decision.reason,
                           operation=spec.name, **extra)
    return DeniedError(decision.reason or f"{spec.name} denied", code=decision.code,
                       decision="deny", source=decision.source, reason=decision.reason,
                       operation=spec.name, **extra)


async def _pre_hooks(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[Any], target: Target,
    outcome: Outcome,
) -> None:
    hooks = svc.hooks
    if hooks is None:
        return
    namespace = target.namespaces[0] if len(target.namespaces) == 1 else None
    for event in spec.pre_events:
        if not hooks.wants(event):
            continue
        answer = await hooks.fire(event, call.pre_payload(event), agent_id=caller.agent_id,
                                  namespace=namespace)
        decision = hook_decision(event, answer)
        if decision.verdict == "deny":
            outcome.decisions.append(decision)
            raise _refusal(spec, decision)
        if decision.verdict == "ask_user":
            outcome.decisions.append(decision)
            if svc.permission_mode == "enforce":
                outcome.ask = outcome.ask or decision
            else:
                outcome.advisory.append(decision)
                log.warning("hook asked for approval; allowed in %s mode",
                            svc.permission_mode, extra={"event": event})
        outcome.modified = outcome.modified or answer.modified
        call.modified(event, dict(answer.payload))


async def _gate(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[Any], target: Target,
    outcome: Outcome,
) -> None:
    """AskUser in enforce mode: spend the caller's approval of this exact request, or hold
    it (202 with the approval id). Without the approval API it stays a 403."""
    if outcome.ask is None:
        return
    approvals = svc.approvals
    if approvals is None or not approvals.enabled:
        raise _refusal(spec, outcome.ask)
    request = call.request()
    if caller.approval is not None:
        outcome.consumed = await approvals.consume(
            caller.approval, agent_id=caller.agent_id, operation=spec.name, request=request)
        return
    action = await approvals.hold(
        agent_id=caller.agent_id, operation=spec.name, rule_operation=spec.rule_operation,
        namespace=target.namespaces[0] if len(target.namespaces) == 1 else None,
        request=request, decision=outcome.ask)
    raise HeldForApprovalError(
        f"{outcome.ask.reason or 'this operation needs approval'}; held as approval "
        f"{action.id}: resubmit the same request with X-Cortex-Approval once it is approved",
        approval_id=str(action.id), decision="ask_user", source=outcome.ask.source,
        reason=outcome.ask.reason, expires_at=action.expires_at.isoformat())


def hook_decision(event: EventName, answer: ChainOutcome) -> Decision:
    """A hook chain's answer as a Decision."""
    if answer.decision == "allow":
        return ALLOW
    reason = (answer.prompt or answer.reason) if answer.decision == "ask_user" else answer.reason
    return Decision(answer.decision, f"hook:{event}", reason or f"{answer.decision} by a "
                    f"{event} hook", "hook_denied" if answer.decision == "deny" else
                    "approval_required", hook_code=answer.code)


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


async def _post_hooks(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[R], target: Target,
    result: R, outcome: Outcome,
) -> None:
    hooks = svc.hooks
    if hooks is None:
        return
    namespace = target.namespaces[0] if len(target.namespaces) == 1 else None
    for event in spec.post_events:
        if not hooks.wants(event):
            continue
        answer = await hooks.fire(event, call.post_payload(event, result),
                                  agent_id=caller.agent_id, namespace=namespace)
        if answer.decision != "deny":
            continue
        decision = hook_decision(event, answer)
        outcome.post_denied = decision
        outcome.decisions.append(decision)
        if spec.event_class == "read":
            # docs/hooks.md: a Deny on a read's post- event withholds the results.
            raise DeniedError(
                f"{decision.reason} (results withheld)", code="hook_denied", decision="deny",
                source=decision.source, reason=decision.reason, operation=spec.name,
                event=event, hook_code=decision.hook_code, withheld=True)
        log.warning("a %s hook denied after the write was committed; the write stands",
                    event, extra={"event": event, "reason": decision.reason})


def visible(svc: Services, caller: Caller, spec: OperationSpec, namespace: str) -> bool:
    """Whether a read may return something from ``namespace``: the caller's read scope
    covers it and, in enforce mode, no rule denies the read there. Reads that span
    namespaces (recall, listings, traversals) filter their results with this."""
    if not caller.scopes.allows("memory.read", namespace):
        return False
    if svc.permission_mode != "enforce" or spec.rule_operation is None:
        return True
    verdicts = svc.policy.rules.evaluate(agent_id=caller.agent_id,
                                         operation=spec.rule_operation, namespace=namespace)
    return verdicts.rule is None or verdicts.rule.verdict == "allow"
