"""The scope and rules steps of the pipeline, and read isolation: pure decisions over the
request's target, the caller's scopes and the compiled rules (no I/O).

Called by :mod:`.running` (each request) and by reads that span namespaces
(:func:`visible`). Design: ``docs/adr/0009-permissions.md``.
"""

from __future__ import annotations

from typing import Any

from attested_cortex.errors import DeniedError
from attested_cortex.policy.decisions import ALLOW, Decision, strictest
from attested_cortex.policy.scopes import ScopeBase
from attested_cortex.policy.tiers import ceiling_refusal
from attested_cortex.service.pipeline.calls import Call, Outcome, Target
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.operations import OperationSpec


def check_scope(spec: OperationSpec, caller: Caller, target: Target) -> None:
    """403 ``scope_denied`` for a scope not held; ``trust_ceiling`` for one held but
    removed by the caller's trust tier (ADR 0049)."""
    if spec.scope is None:
        return
    for namespace in target.namespaces or (None,):
        require_scope(caller, spec.scope, namespace)


def require_scope(caller: Caller, base: ScopeBase, namespace: str | None) -> None:
    """The scope step's check of one base in one namespace (None: in some namespace), also
    called by an op whose request decides a further scope (a spoke review that drops)."""
    if caller.scopes.allows(base, namespace):
        return
    if caller.ceiling is not None and caller.held is not None \
            and caller.held.allows(base, namespace):
        raise ceiling_refusal(caller.agent_id, caller.ceiling, base, namespace)
    where = f" in namespace {namespace!r}" if namespace else ""
    raise DeniedError(
        f"agent {caller.agent_id} lacks scope {base}{where}",
        code="scope_denied", decision="deny", scope=base, namespace=namespace,
        source="scope", reason=f"scope {base} not held",
    )


def require_bare(caller: Caller, base: ScopeBase, what: str) -> None:
    """403 unless ``base`` is held bare (unqualified, or ``**``): what an answer about the
    whole cortex needs (a deep audit, a cortex export), since a qualified holder may see only
    what its qualifier covers. ``trust_ceiling`` when the tier removed a bare scope held,
    else ``scope_denied`` naming ``what``."""
    if caller.scopes.holds(base):
        return
    if caller.ceiling is not None and caller.held is not None and caller.held.holds(base):
        raise ceiling_refusal(caller.agent_id, caller.ceiling, base, None)
    raise DeniedError(
        f"{what} covers the whole cortex: it needs {base} unqualified, which agent "
        f"{caller.agent_id} does not hold", code="scope_denied", decision="deny", scope=base,
        namespace=None, source="scope", reason=f"scope {base} not held unqualified")


def rules(
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
                    f"{spec.rule_operation or spec.name!r} on this object is for its owner "
                    f"{target.owner} only; a memory.override scope or a rule naming the "
                    "agent grants more",
                    "not_owner")


def _named_allow(svc: Services, operation: str, agent_id: str, namespace: str | None) -> bool:
    rule = svc.policy.rules.evaluate(agent_id=agent_id, operation=operation,
                                     namespace=namespace).rule
    return rule is not None and rule.verdict == "allow" and rule.names(agent_id)


def enforce(
    svc: Services, spec: OperationSpec, outcome: Outcome, decided: tuple[Decision, Decision]
) -> None:
    """Apply the mode to the rule decision; invariants always hold."""
    rule, invariant = decided
    outcome.decisions.extend(d for d in decided if not d.allows)
    outcome.allowed.extend(d for d in decided if d.allows)  # summarized in a read's record
    if not invariant.allows:
        raise refusal(spec, invariant)
    if rule.allows:
        return
    if svc.permission_mode != "enforce":
        outcome.advisory.append(rule)
    elif rule.verdict == "ask_user":
        outcome.ask = rule  # settled at the approval gate, after the hooks (a Deny wins)
    else:
        raise refusal(spec, rule)


def recheck(
    svc: Services, spec: OperationSpec, outcome: Outcome, decided: tuple[Decision, Decision]
) -> None:
    """:func:`enforce` again after a Modify, recording only decisions not seen before."""
    again = Outcome()
    try:
        enforce(svc, spec, again, decided)
    finally:
        outcome.decisions.extend(d for d in again.decisions if d not in outcome.decisions)
        outcome.advisory.extend(d for d in again.advisory if d not in outcome.advisory)
        outcome.ask = outcome.ask or again.ask


def refusal(spec: OperationSpec, decision: Decision, *, index: int | None = None
            ) -> DeniedError:
    """The 403 of ``decision`` (``index``: the item of a batch a hook refused)."""
    extra: dict[str, Any] = {}
    if decision.source.startswith("hook:"):
        extra = {"event": decision.source.removeprefix("hook:"),
                 "hook_code": decision.hook_code}
    if index is not None:
        extra["index"] = index
    if decision.verdict == "ask_user":
        return DeniedError(decision.reason or "this operation needs a human's approval",
                           code="approval_required", decision="ask_user",
                           source=decision.source, reason=decision.reason,
                           operation=spec.name, **extra)
    message = decision.reason or f"{spec.name} denied"
    if index is not None:
        message = f"memories[{index}]: {message}"
    return DeniedError(message, code=decision.code,
                       decision="deny", source=decision.source, reason=decision.reason,
                       operation=spec.name, **extra)


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
