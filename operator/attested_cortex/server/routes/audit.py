"""``GET /v1/audit/verify``: the signed_events chain, verified end to end."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.errors import InvalidInputError
from attested_cortex.server.openapi import Operation, Param
from attested_cortex.server.schemas import AuditVerifyOut
from attested_cortex.server.state import caller, state
from attested_cortex.service import auditing

routes = web.RouteTableDef()


@routes.get("/v1/audit/verify")
async def audit_verify(request: web.Request) -> web.Response:
    """``{ok, events, first_bad_sequence, ...}`` for the whole chain; ``?deep=true`` adds
    ``deep``: every memory and link row checked against its latest write record."""
    raw = request.query.get("deep", "false").lower()
    if raw not in _FLAGS:
        raise InvalidInputError("deep must be true or false", field="deep")
    report = await auditing.verify(state(request).services, caller(request), deep=_FLAGS[raw])
    return web.json_response(report)


_FLAGS = {"true": True, "1": True, "false": False, "0": False}
operations = [
    Operation("GET", "/v1/audit/verify", "Verify the whole signed_events chain (and, with "
              "deep=true, every row against its write record)", 200, AuditVerifyOut,
              params=[Param("deep", "query", {"type": "boolean"},
                            description="Also sweep memory and link rows")]),
]
