"""``POST /v1/spoke/memory``: the spoke-memory family (seed 001, docs/spoke-memory.md).

The body is ``{op, request, idempotency_key?}`` (the ``Idempotency-Key`` header is used when
the body names no key); ``X-Spoke-Capabilities`` is the request's negotiated flag set (ADR
0061: absent, ``spoke-memory`` only). The service decodes and runs the op.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from attested_cortex.server.body import read_model
from attested_cortex.server.openapi import COMMON_ERRORS, Operation, Param
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources.spoke import dispatch as spoke_dispatch
from attested_cortex.spoke.models import Flag
from attested_cortex.spoke.operations import negotiate
from attested_cortex.spoke.requests import Dispatch

routes = web.RouteTableDef()
HEADER: Final = "X-Spoke-Capabilities"


def negotiated(request: web.Request) -> frozenset[Flag]:
    """The request's flags (ADR 0061): each known, sub-flags only beside spoke-memory."""
    text = request.headers.get(HEADER)
    return negotiate(None if text is None else text.split(","), field=HEADER)


@routes.post("/v1/spoke/memory")
async def spoke_memory(request: web.Request) -> web.Response:
    """One family op: a read answers its payload, a write its MemoryReceipt."""
    svc = state(request).services
    flags = negotiated(request)
    body = await read_model(request, Dispatch, max_bytes=svc.limits.max_body_bytes)
    who = caller(request)
    answer = await spoke_dispatch.dispatch(
        svc, who, op=body.op, request=body.request,
        key=body.idempotency_key or who.idempotency_key, negotiated=flags)
    return web.json_response(answer)


operations = [
    Operation("POST", "/v1/spoke/memory", "Run one spoke-memory op (seed 001)", 200, None,
              Dispatch, params=[Param(HEADER, "header", {"type": "string"})],
              errors=(*COMMON_ERRORS, 404, 409, 501)),
]
