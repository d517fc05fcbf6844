"""Firing hooks from an operation: the pre-chain may change or stop it, the post-chain observes.

Until the approval flow exists, an AskUser answer is a Deny in enforce mode and an Allow in
advisory mode (seed 000, Decision 2); with permissions ``off`` it is an Allow too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from attested_cortex.errors import DeniedError, InvalidInputError
from attested_cortex.service.context import Caller, Services

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


def revalidate(model: type[M], payload: Mapping[str, Any]) -> M:
    """Validate a payload a pre-hook returned: a hook cannot smuggle in what a client could
    not send (a Modify that breaks the input rules is refused as 400)."""
    try:
        return model.model_validate(dict(payload))
    except ValidationError as exc:
        raise InvalidInputError(
            "a hook modified the request into an invalid one", code="hook_invalid_modify",
            errors=[e["msg"] for e in exc.errors()],
        ) from exc


async def before(
    svc: Services, caller: Caller, event: str, payload: Mapping[str, Any], *,
    namespace: str | None,
) -> dict[str, Any]:
    """Run the pre-chain of ``event``; return the (possibly modified) payload."""
    if svc.hooks is None:
        return dict(payload)
    outcome = await svc.hooks.fire(event, payload, agent_id=caller.agent_id, namespace=namespace)
    if outcome.decision == "deny":
        raise DeniedError(
            outcome.reason or f"denied by a {event} hook",
            code="hook_denied", decision="deny", event=event, hook_code=outcome.code,
            reason=outcome.reason,
        )
    if outcome.decision == "ask_user":
        if svc.permission_mode == "enforce":
            raise DeniedError(
                outcome.prompt or f"a {event} hook asks for approval",
                code="approval_required", decision="ask_user", event=event,
                reason=outcome.reason,
            )
        log.warning("hook asked for approval; allowed in %s mode", svc.permission_mode,
                    extra={"event": event})
    return dict(outcome.payload)


async def after(
    svc: Services, caller: Caller, event: str, payload: Mapping[str, Any], *,
    namespace: str | None,
) -> Mapping[str, Any]:
    """Run the post-chain of ``event``; its decisions cannot undo the operation."""
    if svc.hooks is None:
        return payload
    outcome = await svc.hooks.fire(event, payload, agent_id=caller.agent_id, namespace=namespace)
    return outcome.payload
