"""``GET /v1/audit/verify``: the signed_events chain, verified end to end."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.body import read_query
from attested_cortex.server.openapi import Operation, params_of
from attested_cortex.server.responses import AuditVerifyOut
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import auditing
from attested_cortex.service.resources.queries import AuditQuery

routes = web.RouteTableDef()


@routes.get("/v1/audit/verify")
async def audit_verify(request: web.Request) -> web.Response:
    """``{ok, events, first_bad_sequence, ...}`` for the whole chain; ``?deep=true`` adds
    ``deep``: every memory and link row checked against its latest write record."""
    query = read_query(request, AuditQuery)
    report = await auditing.verify(state(request).services, caller(request), deep=query.deep)
    return web.json_response(report)


operations = [
    Operation("GET", "/v1/audit/verify", "Verify the whole signed_events chain (and, with "
              "deep=true, every row against its write record)", 200, AuditVerifyOut,
              params=params_of(AuditQuery, "query")),
]
