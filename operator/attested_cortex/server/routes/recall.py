"""``POST /v1/recall``."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.body import read_model
from attested_cortex.server.encoding import json_answer
from attested_cortex.server.openapi import COMMON_ERRORS, Operation
from attested_cortex.server.responses import RecallOut
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import recall, receipts
from attested_cortex.service.resources.commands import RecallQuery

routes = web.RouteTableDef()


@routes.post("/v1/recall")
async def recall_memories(request: web.Request) -> web.Response:
    """Ranked memories for a query, within an optional token budget."""
    svc = state(request).services
    query = await read_model(request, RecallQuery, max_bytes=svc.limits.max_body_bytes)
    result = await recall.recall(svc, caller(request), query)
    view = recall.result_view(result)
    if query.receipts:
        view["receipts"] = await receipts.receipts(svc, [h.memory for h in result.hits])
    return json_answer(view)


operations = [
    # 404: receipts asked of a cortex that signs no checkpoints (no audit signer)
    Operation("POST", "/v1/recall", "Recall memories for a query", 200, RecallOut, RecallQuery,
              errors=(*COMMON_ERRORS, 404)),
]
