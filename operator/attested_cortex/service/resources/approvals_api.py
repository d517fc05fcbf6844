"""The approval API's operations (``/v1/approvals``), each a pipeline Call.

Deciding needs the ``approvals.decide`` scope *and* a request signed with the cortex's
approval secret (verified by the route before anything is read into a command; spent, as
replay protection, in the decision's own transaction); it fires
``pre_approval`` (a hook may refuse the decision) and ``post_approval``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from attested_cortex.errors import InvalidInputError, NotFoundError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.policy.signatures import verify
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import Call, run
from attested_cortex.service.workers.approving import Approvals, action_view
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


class ListApprovals(BaseModel):
    """``GET /v1/approvals?cursor=&limit=``: one page of pending actions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cursor: str | None = Field(None, max_length=200,
                               description="`next` of the previous page (absent: the first)")
    limit: int = Field(50, ge=1, le=500, description="At most this many actions")


#: The request bytes one page carries at most (its first action always: a page is never
#: empty while actions wait); 80 held 1 MB requests were one 251 MiB answer before.
PAGE_REQUEST_BYTES = 1024 * 1024


def page_cursor(action: Action) -> str:
    """The opaque cursor after ``action``: its ``(created_at, id)``."""
    text = f"{action.created_at.isoformat()}|{action.id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def after_cursor(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    """The ``(created_at, id)`` a cursor names (400 for one this server did not make)."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, action_id = text.partition("|")
        return datetime.fromisoformat(stamp), uuid.UUID(action_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError("cursor is not a `next` this API returned", field="cursor",
                                code="bad_cursor") from exc


def fill_page(found: list[Action], limit: int) -> dict[str, Any]:
    """The page of ``found`` (up to ``limit + 1`` actions): at most ``limit`` actions and
    :data:`PAGE_REQUEST_BYTES` of requests, and the cursor of the rest (None: no more)."""
    views: list[dict[str, Any]] = []
    spent = 0
    for action in found[:limit]:
        size = len(json.dumps(action.request, default=str).encode())
        if views and spent + size > PAGE_REQUEST_BYTES:
            break
        views.append(action_view(action))
        spent += size
    more = len(found) > len(views)
    return {"approvals": views,
            "next": page_cursor(found[len(views) - 1]) if more and views else None}


@dataclass
class ListCall(Call[dict[str, Any]]):
    """``GET /v1/approvals``: one page of pending actions, oldest first."""

    spec = ops.APPROVALS_LIST
    query: ListApprovals

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        found = await enabled(svc).pending(after=after_cursor(self.query.cursor),
                                           limit=self.query.limit + 1)
        return fill_page(found, self.query.limit)


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


async def pending(svc: Services, caller: Caller,
                  query: ListApprovals | None = None) -> dict[str, Any]:
    """One page of pending actions: ``{approvals, next}``."""
    return await run(svc, caller, ListCall(query or ListApprovals()))


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
