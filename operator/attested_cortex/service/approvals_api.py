"""The approval API's operations (``/v1/approvals``), each a pipeline Call.

Deciding needs the ``approvals.decide`` scope *and* a request signed with the cortex's
approval secret (verified by the route before anything is read into a command; spent, as
replay protection, in the decision's own transaction); it fires
``pre_approval`` (a hook may refuse the decision) and ``post_approval``.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from attested_cortex.errors import NotFoundError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.policy.signatures import verify
from attested_cortex.service import operations as ops
from attested_cortex.service.approving import Approvals, action_view
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.pipeline import Call, run
from attested_cortex.store.approvals import Action


class DecideApproval(BaseModel):
    """``POST /v1/approvals/{id}``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    decision: Literal["approve", "reject"]
    remember: Literal["forever"] | None = Field(
        None, description="'forever' also persists an allow rule for this agent, operation "
        "and namespace (shown in rule_summary)")


def enabled(svc: Services) -> Approvals:
    """The approval service, or 404 when the API is disabled (no HMAC secret)."""
    approvals: Approvals | None = svc.approvals
    if approvals is None or not approvals.enabled:
        raise NotFoundError("the approval API is disabled: configure approval.hmac_secret_file "
                            "(and approval.enabled)", code="approvals_disabled")
    return approvals


class ListCall(Call[list[dict[str, Any]]]):
    """``GET /v1/approvals``: pending actions, oldest first."""

    spec = ops.APPROVALS_LIST

    async def execute(self, svc: Services, caller: Caller) -> list[dict[str, Any]]:
        return [action_view(a) for a in await enabled(svc).pending()]


class StreamCall(Call[AbstractAsyncContextManager[asyncio.Queue[dict[str, Any]]]]):
    """``GET /v1/approvals/stream``: a subscription the route turns into server-sent events."""

    spec = ops.APPROVALS_STREAM

    async def execute(self, svc: Services,
                      caller: Caller) -> AbstractAsyncContextManager[asyncio.Queue[dict[str, Any]]]:
        return enabled(svc).subscribe()


@dataclass
class DecideCall(Call[Action]):
    """``POST /v1/approvals/{id}``: approve or reject, once."""

    spec = ops.APPROVAL_DECIDE
    approval_id: str
    cmd: DecideApproval
    signature: str
    action: Action | None = None

    async def target(self, svc: Services, caller: Caller) -> Any:
        self.action = await enabled(svc).get(self.approval_id)
        return await super().target(svc, caller)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        assert self.action is not None
        return payload(event, approval_id=self.approval_id, operation=self.action.operation,
                       agent_id=self.action.agent_id, reason=self.action.reason or "")

    async def execute(self, svc: Services, caller: Caller) -> Action:
        return await enabled(svc).decide(
            self.approval_id, approve=self.cmd.decision == "approve",
            remember=self.cmd.remember == "forever", decided_by=caller.agent_id,
            signature=self.signature)

    def post_payload(self, event: EventName, result: Action) -> dict[str, Any]:
        return payload(event, approval_id=self.approval_id, operation=result.operation,
                       agent_id=result.agent_id, reason=result.reason or "",
                       decision=result.status, decided_by=result.decided_by or "")


async def pending(svc: Services, caller: Caller) -> list[dict[str, Any]]:
    """Pending actions."""
    return await run(svc, caller, ListCall())


async def subscribe(
    svc: Services, caller: Caller
) -> AbstractAsyncContextManager[asyncio.Queue[dict[str, Any]]]:
    """A subscription to approval events (errors arrive before any event is sent)."""
    return await run(svc, caller, StreamCall())


async def decide(svc: Services, caller: Caller, approval_id: str, cmd: DecideApproval,
                 *, signature: str) -> dict[str, Any]:
    """Decide one action; ``signature`` (verified by :func:`check_signature`) is spent only
    if the decision is made."""
    return action_view(await run(svc, caller, DecideCall(approval_id, cmd, signature)))


class SignedDecision(DecideApproval):
    """A decision that carries its approver's HMAC itself (the ``approval_decide`` MCP tool):
    the same signature as ``POST /v1/approvals/{id}``'s headers, over that request with
    :func:`canonical_body` as its body."""

    id: str = Field(max_length=64, description="Approval id")
    timestamp: str = Field(max_length=12, description="Unix seconds of the signature "
                           "(X-Cortex-Timestamp)")
    signature: str = Field(max_length=100, description="sha256=<hex HMAC(secret, "
                           "'{timestamp}.POST./v1/approvals/{id}.{canonical body}')>")

    def decision_only(self) -> DecideApproval:
        """The decision without its signature."""
        return DecideApproval(decision=self.decision, remember=self.remember)


def canonical_body(cmd: DecideApproval) -> bytes:
    """The body a :class:`SignedDecision` is signed over: compact JSON, sorted keys, no
    ``remember`` when unset (``{"decision":"approve"}``)."""
    return json.dumps(cmd.model_dump(exclude_none=True), separators=(",", ":"),
                      sort_keys=True).encode()


async def check_signature(svc: Services, *, timestamp: str | None, signature: str | None,
                          method: str, path: str, body: bytes) -> str:
    """The approver's HMAC over one decision request, verified (401 otherwise); it is spent
    (a second use is 401) in the decision's own transaction, so a decision refused before
    it is made (scope, rules, hooks, 404, 409) does not burn it."""
    approvals = enabled(svc)
    assert approvals.secret is not None
    return verify(approvals.secret, timestamp=timestamp, signature=signature,
                  method=method, path=path, body=body, now=time.time())


async def decide_signed(svc: Services, caller: Caller, cmd: SignedDecision) -> dict[str, Any]:
    """Decide one action with a decision that carries its own signature."""
    decision = cmd.decision_only()
    signature = await check_signature(svc, timestamp=cmd.timestamp, signature=cmd.signature,
                                      method="POST", path=f"/v1/approvals/{cmd.id}",
                                      body=canonical_body(decision))
    return await decide(svc, caller, cmd.id, decision, signature=signature)
