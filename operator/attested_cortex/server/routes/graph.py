"""``/v1/links`` and ``/v1/kg/*``: create and invalidate links, traverse the graph."""

from __future__ import annotations

from functools import partial

from aiohttp import web

from attested_cortex.server import replaying
from attested_cortex.server.body import read_model, read_query
from attested_cortex.server.encoding import json_answer
from attested_cortex.server.openapi import COMMON_ERRORS, IDEMPOTENCY_KEY, Operation, params_of
from attested_cortex.server.responses import (
    LinkListOut,
    LinkOut,
    LinkVerifyOut,
    PathsOut,
    SubgraphOut,
    TimelineOut,
)
from attested_cortex.server.routes.memories import path_uuid
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import kg, links
from attested_cortex.service.resources.graph_commands import (
    CreateLink,
    InvalidateLink,
    KgPaths,
    KgQuery,
)
from attested_cortex.service.resources.queries import LinkRef, LinksPage, MemoryRef, TimelineQuery

routes = web.RouteTableDef()


@routes.post("/v1/links")
async def create_link(request: web.Request) -> web.Response:
    """Link two memories; 201 with the stored (and possibly signed) link."""
    svc = state(request).services
    cmd = await read_model(request, CreateLink, max_bytes=svc.limits.max_body_bytes)

    return await replaying.once(request, cmd, partial(links.create, svc, cmd=cmd),
                                answer=links.LINK, status=201, resource_id=cmd.id)


@routes.get("/v1/links/{id}/verify")
async def verify_link(request: web.Request) -> web.Response:
    """Recompute a link's payload from its row and check the signature."""
    return web.json_response(await links.verify(state(request).services, caller(request),
                                                path_uuid(request)))


@routes.get("/v1/memories/{id}/links")
async def memory_links(request: web.Request) -> web.Response:
    """A memory's links, one page after ``?cursor=``: ``{links, truncated, next}``."""
    query = read_query(request, LinksPage)
    return web.json_response(await kg.links_of(state(request).services, caller(request),
                                               path_uuid(request), limit=query.limit,
                                               cursor=query.cursor))


@routes.post("/v1/kg/query")
async def kg_query(request: web.Request) -> web.Response:
    """Memories reachable from a start memory."""
    svc = state(request).services
    cmd = await read_model(request, KgQuery, max_bytes=svc.limits.max_body_bytes)
    return json_answer(await kg.query(svc, caller(request), cmd))


@routes.post("/v1/kg/paths")
async def kg_paths(request: web.Request) -> web.Response:
    """Simple paths between two memories."""
    svc = state(request).services
    cmd = await read_model(request, KgPaths, max_bytes=svc.limits.max_body_bytes)
    return json_answer(await kg.paths(svc, caller(request), cmd))


@routes.get("/v1/kg/timeline")
async def kg_timeline(request: web.Request) -> web.Response:
    """A memory's links ordered by validity (``?memory_id=``)."""
    query = read_query(request, TimelineQuery)
    return web.json_response(await kg.timeline(state(request).services, caller(request),
                                               query.memory_id))


@routes.post("/v1/kg/invalidate")
async def kg_invalidate(request: web.Request) -> web.Response:
    """Close a link's validity window."""
    svc = state(request).services
    cmd = await read_model(request, InvalidateLink, max_bytes=svc.limits.max_body_bytes)

    return await replaying.once(request, cmd, partial(links.invalidate, svc, cmd=cmd),
                                answer=links.LINK, resource_id=cmd.link_id)


_MISSING = (*COMMON_ERRORS, 404)
operations = [
    Operation("POST", "/v1/links", "Link two memories", 201, LinkOut, CreateLink,
              params=[IDEMPOTENCY_KEY], errors=(*_MISSING, 409)),
    Operation("GET", "/v1/links/{id}/verify", "Re-verify a link's signature", 200,
              LinkVerifyOut, params=params_of(LinkRef, "path"),
              errors=_MISSING),
    Operation("GET", "/v1/memories/{id}/links", "Links of a memory", 200, LinkListOut,
              params=[*params_of(MemoryRef, "path"), *params_of(LinksPage, "query")],
              errors=_MISSING),
    Operation("POST", "/v1/kg/query", "Traverse from a memory (depth 1..5)", 200, SubgraphOut,
              KgQuery, errors=_MISSING),
    Operation("POST", "/v1/kg/paths", "Simple paths between two memories (1..7 hops)", 200,
              PathsOut, KgPaths, errors=_MISSING),
    Operation("GET", "/v1/kg/timeline", "Links of a memory ordered by validity", 200,
              TimelineOut, params=params_of(TimelineQuery, "query"), errors=_MISSING),
    Operation("POST", "/v1/kg/invalidate", "Close a link's validity window", 200, LinkOut,
              InvalidateLink, params=[IDEMPOTENCY_KEY], errors=(*_MISSING, 409)),
]
