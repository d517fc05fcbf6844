"""``POST /v1/recall``."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.body import read_model
from attested_cortex.server.encoding import json_answer
from attested_cortex.server.openapi import Operation
from attested_cortex.server.responses import RecallOut
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import recall
from attested_cortex.service.resources.commands import RecallQuery

routes = web.RouteTableDef()


@routes.post("/v1/recall")
async def recall_memories(request: web.Request) -> web.Response:
    """Ranked memories for a query, within an optional token budget."""
    svc = state(request).services
    query = await read_model(request, RecallQuery, max_bytes=svc.limits.max_body_bytes)
    result = await recall.recall(svc, caller(request), query)
    return json_answer(recall.result_view(result))


operations = [
    Operation("POST", "/v1/recall", "Recall memories for a query", 200, RecallOut, RecallQuery),
]
