"""``/v1/approvals``: list pending AskUser actions, decide one (HMAC-signed), stream events."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from attested_cortex.server.body import parse, read_json, read_query, read_raw
from attested_cortex.server.openapi import COMMON_ERRORS, Operation, Param, params_of
from attested_cortex.server.responses import ApprovalListOut, ApprovalOut
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import approvals_api
from attested_cortex.service.resources.approvals_api import DecideApproval, ListApprovals
from attested_cortex.service.workers.approving import CLOSED

routes = web.RouteTableDef()
KEEPALIVE_S = 15.0


@routes.get("/v1/approvals")
async def list_approvals(request: web.Request) -> web.Response:
    """One page of pending actions, oldest first: ``{approvals, next}``."""
    query = read_query(request, ListApprovals)
    return web.json_response(await approvals_api.pending(state(request).services,
                                                         caller(request), query))


@routes.get("/v1/approvals/stream")
async def stream_approvals(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``created``, ``decided`` and ``expired`` actions."""
    subscription = await approvals_api.subscribe(state(request).services, caller(request))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)
    async with subscription as queue:
        try:
            await response.write(b": subscribed\n\n")
            while True:
                try:
                    async with asyncio.timeout(KEEPALIVE_S):  # wait_for can lose a cancel
                        event = await queue.get()
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if event is CLOSED:
                    break
                data = json.dumps(event["approval"])
                await response.write(f"event: {event['event']}\ndata: {data}\n\n".encode())
        except ConnectionResetError:  # the client went away: the stream simply ends
            pass
    return response


@routes.post("/v1/approvals/{id}")
async def decide_approval(request: web.Request) -> web.Response:
    """Approve or reject; the request must be signed with the approval secret."""
    svc = state(request).services
    approvals_api.enabled(svc)
    body = await read_body(request, max_bytes=svc.limits.max_body_bytes)
    signature = await approvals_api.check_signature(
        svc, timestamp=request.headers.get("X-Cortex-Timestamp"),
        signature=request.headers.get("X-Cortex-Signature"), method=request.method,
        path=request.path, body=body)
    cmd = parse(DecideApproval, await read_json(request, max_bytes=svc.limits.max_body_bytes))
    return web.json_response(await approvals_api.decide(
        svc, caller(request), request.match_info["id"], cmd, signature=signature))


async def read_body(request: web.Request, *, max_bytes: int) -> bytes:
    """The raw body (what was signed), within the size limit."""
    await read_json(request, max_bytes=max_bytes)  # size, UTF-8 and JSON checks first
    return await read_raw(request, max_bytes=max_bytes)  # the bytes read_json kept


_ID = Param("id", "path", {"type": "string", "format": "uuid"}, description="Approval id")
operations = [
    Operation("GET", "/v1/approvals", "Pending AskUser actions, one page (cursor)", 200,
              ApprovalListOut, params=params_of(ListApprovals, "query"),
              errors=(*COMMON_ERRORS, 404)),
    Operation("POST", "/v1/approvals/{id}",
              "Approve or reject (X-Cortex-Timestamp and X-Cortex-Signature: sha256=<HMAC>)",
              200, ApprovalOut, DecideApproval, params=[_ID], errors=(*COMMON_ERRORS, 404, 409)),
    Operation("GET", "/v1/approvals/stream", "Approval events (text/event-stream)", 200, None,
              errors=(*COMMON_ERRORS, 404)),
]
