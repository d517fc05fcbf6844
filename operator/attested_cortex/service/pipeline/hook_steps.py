"""The hook steps of the pipeline: pre- hooks (with the approval gate that settles an
AskUser) and post- hooks. Called by :mod:`.running` only.
"""

from __future__ import annotations

import logging
from typing import Any

from attested_cortex.errors import DeniedError, HeldForApprovalError
from attested_cortex.hooks.events import EventName
from attested_cortex.policy.decisions import ALLOW, Decision
from attested_cortex.service.pipeline.calls import Call, Outcome, R, Target
from attested_cortex.service.pipeline.context import Caller, ChainOutcome, Services
from attested_cortex.service.pipeline.deciding import refusal
from attested_cortex.service.pipeline.operations import OperationSpec

log = logging.getLogger(__name__)


async def pre_hooks(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[Any], target: Target,
    outcome: Outcome,
) -> None:
    hooks = svc.hooks
    if hooks is None or not any(hooks.wants(event) for event in spec.pre_events):
        return
    for index, (part, namespace) in enumerate(call.hooked(target)):
        for event in spec.pre_events:
            if not hooks.wants(event):
                continue
            answer = await hooks.fire(event, part.pre_payload(event),
                                      agent_id=caller.agent_id, namespace=namespace)
            decision = hook_decision(event, answer)
            if decision.verdict == "deny":
                outcome.decisions.append(decision)
                raise refusal(spec, decision, index=index if call.batched else None)
            if decision.verdict == "ask_user":
                outcome.decisions.append(decision)
                if svc.permission_mode == "enforce":
                    outcome.ask = outcome.ask or decision
                else:
                    outcome.advisory.append(decision)
                    log.warning("hook asked for approval; allowed in %s mode",
                                svc.permission_mode, extra={"event": event})
            outcome.modified = outcome.modified or answer.modified
            part.modified(event, dict(answer.payload))


async def gate(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[Any], target: Target,
    outcome: Outcome,
) -> None:
    """AskUser in enforce mode: check the caller's approval of this exact request (the
    operation spends it), or hold it (202 with the approval id). Without the approval API
    it stays a 403."""
    if outcome.ask is None:
        return
    approvals = svc.approvals
    if approvals is None or not approvals.enabled:
        raise refusal(spec, outcome.ask)
    request = call.request()
    if caller.approval is not None:
        outcome.approved = await approvals.check(
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


async def post_hooks(
    svc: Services, spec: OperationSpec, caller: Caller, call: Call[R], target: Target,
    result: R, outcome: Outcome,
) -> R:
    """Fire the post- events; returns the result as the hooks left it (a single call's
    post- chain may reorder it, :meth:`.calls.Call.post_answer`)."""
    hooks = svc.hooks
    if hooks is None or not any(hooks.wants(event) for event in spec.post_events):
        return result
    parts = call.hooked(target)
    for (part, namespace), each in zip(parts, call.hooked_results(result), strict=True):
        for event in spec.post_events:
            if not hooks.wants(event):
                continue
            answer = await hooks.fire(event, part.post_payload(event, each),
                                      agent_id=caller.agent_id, namespace=namespace)
            if answer.decision != "deny":
                if not call.batched:
                    result = each = call.post_answer(event, result, answer)
                continue
            decision = hook_decision(event, answer)
            outcome.post_denied = decision
            outcome.decisions.append(decision)
            if spec.event_class == "read":
                # docs/hooks.md: a Deny on a read's post- event withholds the results.
                raise DeniedError(
                    f"{decision.reason} (results withheld)", code="hook_denied",
                    decision="deny", source=decision.source, reason=decision.reason,
                    operation=spec.name, event=event, hook_code=decision.hook_code,
                    withheld=True)
            log.warning("a %s hook denied after the write was committed; the write stands",
                        event, extra={"event": event, "reason": decision.reason})
    return result
