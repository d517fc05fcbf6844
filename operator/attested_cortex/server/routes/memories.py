"""``/v1/memories``: store, read, update, delete (tombstone), list."""

from __future__ import annotations

import uuid
from functools import partial

from aiohttp import web

from attested_cortex.errors import InvalidInputError
from attested_cortex.namespaces import parse_namespace
from attested_cortex.server import replaying
from attested_cortex.server.body import read_model, read_query
from attested_cortex.server.openapi import COMMON_ERRORS, IDEMPOTENCY_KEY, Operation, params_of
from attested_cortex.server.responses import (
    MemoryBatchOut,
    MemoryListOut,
    MemoryOut,
    MemoryReadOut,
    MemoryVerifyOut,
)
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import batches, memories, receipts
from attested_cortex.service.resources.commands import StoreMemories, StoreMemory, UpdateMemory
from attested_cortex.service.resources.queries import ListMemories, MemoryRef, ReadOptions
from attested_cortex.service.resources.views import memory_view

routes = web.RouteTableDef()


def path_uuid(request: web.Request, name: str = "id") -> uuid.UUID:
    """A UUID path parameter (400 naming it when malformed)."""
    try:
        return uuid.UUID(request.match_info[name])
    except ValueError as exc:
        raise InvalidInputError(f"{name} must be a UUID", field=name) from exc


@routes.post("/v1/memories")
async def store_memory(request: web.Request) -> web.Response:
    """Store a memory; 201 with the stored memory."""
    svc = state(request).services
    cmd = await read_model(request, StoreMemory, max_bytes=svc.limits.max_body_bytes)

    return await replaying.once(request, cmd, partial(memories.store, svc, cmd=cmd),
                                answer=memories.MEMORY, status=201)


@routes.post("/v1/memories:batch")
async def store_memories(request: web.Request) -> web.Response:
    """Store up to 1,000 memories, all or nothing; 201 with them, in order."""
    svc = state(request).services
    cmd = await read_model(request, StoreMemories, max_bytes=svc.limits.max_batch_body_bytes)

    return await replaying.once(request, cmd, partial(batches.store_batch, svc, cmd=cmd),
                                answer=batches.MEMORIES, status=201)


@routes.get("/v1/memories")
async def list_memories(request: web.Request) -> web.Response:
    """Live memories of ``?namespace=`` (and its children), newest first by creation, one
    page after ``?cursor=``: ``{memories, truncated, next}``."""
    svc = state(request).services
    query = read_query(request, ListMemories)
    namespace = parse_namespace(query.namespace) if query.namespace is not None else None
    page = await memories.search(svc, caller(request), namespace=namespace, limit=query.limit,
                                 cursor=query.cursor)
    view = page.view()
    if query.receipts:
        view["receipts"] = await receipts.receipts(svc, page.memories)
    return web.json_response(view)


@routes.get("/v1/memories/{id}")
async def get_memory(request: web.Request) -> web.Response:
    """One memory (with its receipt on ``?receipts=true``)."""
    svc = state(request).services
    options = read_query(request, ReadOptions)
    memory = await memories.get(svc, caller(request), path_uuid(request))
    view = memory_view(memory)
    if options.receipts:
        view["receipts"] = await receipts.receipts(svc, (memory,))
    return web.json_response(view)


@routes.patch("/v1/memories/{id}")
async def update_memory(request: web.Request) -> web.Response:
    """Change a memory's fields."""
    svc = state(request).services
    memory_id = path_uuid(request)
    cmd = await read_model(request, UpdateMemory, max_bytes=svc.limits.max_body_bytes)

    write = partial(memories.update, svc, memory_id=memory_id, cmd=cmd)
    return await replaying.once(request, cmd, write, answer=memories.MEMORY,
                                resource_id=memory_id)


@routes.delete("/v1/memories/{id}")
async def delete_memory(request: web.Request) -> web.Response:
    """Tombstone a memory; answers the tombstone."""
    svc, memory_id = state(request).services, path_uuid(request)

    return await replaying.once(request, MemoryRef(id=memory_id),
                                partial(memories.delete, svc, memory_id=memory_id),
                                answer=memories.MEMORY, resource_id=memory_id)


@routes.get("/v1/memories/{id}/verify")
async def verify_memory(request: web.Request) -> web.Response:
    """Recompute the signed payload of the current revision and check its signature."""
    return web.json_response(await memories.verify(state(request).services, caller(request),
                                                   path_uuid(request)))


_ID = params_of(MemoryRef, "path")[0]
operations = [
    Operation("POST", "/v1/memories", "Store a memory", 201, MemoryOut, StoreMemory,
              params=[IDEMPOTENCY_KEY], errors=(*COMMON_ERRORS, 409)),
    Operation("POST", "/v1/memories:batch", "Store up to 1,000 memories, all or nothing", 201,
              MemoryBatchOut, StoreMemories, params=[IDEMPOTENCY_KEY],
              errors=(*COMMON_ERRORS, 409)),
    Operation(
        "GET", "/v1/memories", "List live memories of a namespace subtree", 200, MemoryListOut,
        params=params_of(ListMemories, "query"),
        errors=(*COMMON_ERRORS, 404),  # receipts asked of a cortex without checkpoints
    ),
    Operation("GET", "/v1/memories/{id}", "Read a memory", 200, MemoryReadOut,
              params=[_ID, *params_of(ReadOptions, "query")], errors=(*COMMON_ERRORS, 404)),
    Operation("PATCH", "/v1/memories/{id}", "Update a memory", 200, MemoryOut, UpdateMemory,
              params=[_ID, IDEMPOTENCY_KEY], errors=(*COMMON_ERRORS, 404, 409)),
    Operation("DELETE", "/v1/memories/{id}", "Delete a memory (tombstone)", 200, MemoryOut,
              params=[_ID, IDEMPOTENCY_KEY], errors=(*COMMON_ERRORS, 404, 409)),
    Operation("GET", "/v1/memories/{id}/verify", "Re-verify an agent-signed memory write", 200,
              MemoryVerifyOut, params=[_ID], errors=(*COMMON_ERRORS, 404)),
]
