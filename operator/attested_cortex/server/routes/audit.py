"""``GET /v1/audit/verify``: the signed_events chain, verified end to end."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.openapi import Operation
from attested_cortex.server.schemas import AuditVerifyOut
from attested_cortex.server.state import caller, state
from attested_cortex.service import auditing

routes = web.RouteTableDef()


@routes.get("/v1/audit/verify")
async def audit_verify(request: web.Request) -> web.Response:
    """``{ok, events, first_bad_sequence, ...}`` for the whole chain."""
    report = await auditing.verify(state(request).services, caller(request))
    return web.json_response(report)


operations = [
    Operation("GET", "/v1/audit/verify", "Verify the whole signed_events chain", 200,
              AuditVerifyOut),
]
