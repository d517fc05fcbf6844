"""``POST /v1/transcripts`` and ``GET /v1/memories/{id}/replay``: parse, call one service
function of :mod:`attested_cortex.service.resources.transcripts`, answer."""

from __future__ import annotations

from functools import partial

from aiohttp import web

from attested_cortex.errors import InvalidInputError
from attested_cortex.server import replaying
from attested_cortex.server.body import read_model
from attested_cortex.server.openapi import COMMON_ERRORS, IDEMPOTENCY_KEY, Operation, Param
from attested_cortex.server.responses import ReplayOut, TranscriptOut
from attested_cortex.server.routes.memories import path_uuid
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import transcripts
from attested_cortex.service.resources.transcript_commands import ReplayMemory, StoreTranscript

routes = web.RouteTableDef()
_FLAGS = {"true": True, "1": True, "false": False, "0": False}


@routes.post("/v1/transcripts")
async def store_transcript(request: web.Request) -> web.Response:
    """Store a transcript; 201 with its row (sizes, state, retention)."""
    svc = state(request).services
    cmd = await read_model(request, StoreTranscript, max_bytes=svc.limits.max_body_bytes)

    return await replaying.once(request, cmd, partial(transcripts.store_transcript, svc, cmd=cmd),
                                answer=transcripts.TRANSCRIPT, status=201)


@routes.get("/v1/memories/{id}/replay")
async def replay_memory(request: web.Request) -> web.Response:
    """The spans a memory cites; ``?full=true``: the whole transcripts."""
    raw = request.query.get("full", "false").lower()
    if raw not in _FLAGS:
        raise InvalidInputError("full must be true or false", field="full")
    cmd = ReplayMemory(memory_id=path_uuid(request), full=_FLAGS[raw])
    return web.json_response(await transcripts.replay(state(request).services,
                                                      caller(request), cmd))


operations = [
    Operation("POST", "/v1/transcripts", "Store a transcript (zstd level 3 at rest)", 201,
              TranscriptOut, StoreTranscript, params=[IDEMPOTENCY_KEY],
              errors=(*COMMON_ERRORS, 409)),
    Operation("GET", "/v1/memories/{id}/replay", "Replay the transcript spans a memory cites",
              200, ReplayOut,
              params=[Param("id", "path", {"type": "string", "format": "uuid"},
                            description="Memory id"),
                      Param("full", "query", {"type": "boolean"},
                            description="Return each cited transcript whole")],
              errors=(*COMMON_ERRORS, 404)),
]
