"""``/v1/subscriptions``: webhook subscriptions, their dead letters and replays (issue 41)."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.body import read_model, read_query
from attested_cortex.server.openapi import COMMON_ERRORS, Operation, Param, params_of
from attested_cortex.server.responses import (
    DeadLetterListOut,
    DeadLetterOut,
    SubscriptionActionOut,
    SubscriptionListOut,
    SubscriptionOut,
)
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import subscriptions_api as api
from attested_cortex.service.resources.subscription_commands import (
    CreateSubscription,
    ListDeadLetters,
    ReplayDead,
    ReplayFrom,
    UpdateSubscription,
)

routes = web.RouteTableDef()
_BASE = "/v1/subscriptions/{name}"


def _seq(request: web.Request) -> int:
    text = request.match_info["seq"]
    if not text.isdigit() or len(text) > 19:
        raise web.HTTPNotFound()
    return int(text)


@routes.post("/v1/subscriptions")
async def create(request: web.Request) -> web.Response:
    svc = state(request).services
    cmd = await read_model(request, CreateSubscription, max_bytes=svc.limits.max_body_bytes)
    return web.json_response(await api.create(svc, caller(request), cmd), status=201)


@routes.get("/v1/subscriptions")
async def listed(request: web.Request) -> web.Response:
    return web.json_response(await api.listed(state(request).services, caller(request)))


@routes.get(_BASE)
async def get(request: web.Request) -> web.Response:
    return web.json_response(await api.get(state(request).services, caller(request),
                                           request.match_info["name"]))


@routes.patch(_BASE)
async def update(request: web.Request) -> web.Response:
    svc = state(request).services
    cmd = await read_model(request, UpdateSubscription, max_bytes=svc.limits.max_body_bytes)
    return web.json_response(await api.update(svc, caller(request),
                                              request.match_info["name"], cmd))


@routes.delete(_BASE)
async def delete(request: web.Request) -> web.Response:
    return web.json_response(await api.delete(state(request).services, caller(request),
                                              request.match_info["name"]))


@routes.post(_BASE + "/replay")
async def replay(request: web.Request) -> web.Response:
    svc = state(request).services
    cmd = await read_model(request, ReplayFrom, max_bytes=svc.limits.max_body_bytes)
    return web.json_response(await api.replay(svc, caller(request),
                                              request.match_info["name"], cmd))


@routes.get(_BASE + "/dead-letters")
async def dead_letters(request: web.Request) -> web.Response:
    query = read_query(request, ListDeadLetters)
    return web.json_response(await api.dead_letters(
        state(request).services, caller(request), request.match_info["name"],
        after=query.after, limit=query.limit))


@routes.get(_BASE + "/dead-letters/{seq}")
async def dead_letter(request: web.Request) -> web.Response:
    return web.json_response(await api.dead_letter(
        state(request).services, caller(request), request.match_info["name"], _seq(request)))


@routes.post(_BASE + "/dead-letters/replay")
async def replay_dead(request: web.Request) -> web.Response:
    svc = state(request).services
    cmd = await read_model(request, ReplayDead, max_bytes=svc.limits.max_body_bytes)
    return web.json_response(await api.replay_dead(svc, caller(request),
                                                   request.match_info["name"], cmd))


@routes.delete(_BASE + "/dead-letters")
async def purge(request: web.Request) -> web.Response:
    return web.json_response(await api.purge_dead(state(request).services, caller(request),
                                                  request.match_info["name"]))


_NAME = Param("name", "path", {"type": "string", "maxLength": 253}, description="Name")
_SEQ = Param("seq", "path", {"type": "integer", "minimum": 1}, description="Sequence")
_ERR = (*COMMON_ERRORS, 404)
operations = [
    Operation("POST", "/v1/subscriptions", "Create a webhook subscription", 201,
              SubscriptionOut, CreateSubscription, errors=(*COMMON_ERRORS, 404, 409)),
    Operation("GET", "/v1/subscriptions", "Every subscription and its delivery state", 200,
              SubscriptionListOut, errors=_ERR),
    Operation("GET", _BASE, "One subscription", 200, SubscriptionOut, params=[_NAME],
              errors=_ERR),
    Operation("PATCH", _BASE, "Change a subscription", 200, SubscriptionOut,
              UpdateSubscription, params=[_NAME], errors=_ERR),
    Operation("DELETE", _BASE, "Delete a subscription", 200, SubscriptionActionOut,
              params=[_NAME], errors=_ERR),
    Operation("POST", _BASE + "/replay", "Deliver again from a sequence on", 200,
              SubscriptionActionOut, ReplayFrom, params=[_NAME], errors=(*_ERR, 409)),
    Operation("GET", _BASE + "/dead-letters", "Dead letters, oldest first", 200,
              DeadLetterListOut, params=[_NAME, *params_of(ListDeadLetters, "query")],
              errors=_ERR),
    Operation("GET", _BASE + "/dead-letters/{seq}", "One dead letter with its payload", 200,
              DeadLetterOut, params=[_NAME, _SEQ], errors=_ERR),
    Operation("POST", _BASE + "/dead-letters/replay", "Deliver dead letters again (one or "
              "all)", 200, SubscriptionActionOut, ReplayDead, params=[_NAME], errors=_ERR),
    Operation("DELETE", _BASE + "/dead-letters", "Purge the dead letters", 200,
              SubscriptionActionOut, params=[_NAME], errors=_ERR),
]
