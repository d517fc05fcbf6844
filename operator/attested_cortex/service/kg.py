"""Knowledge-graph reads: query, paths, timeline, and the links of a memory. Each fires its
read-class hooks and runs on the live backend (AGE or CTE: the same answers). The backends
check their inputs themselves (unknown or deleted memories are 404, ranges are 400)."""

from __future__ import annotations

import uuid
from typing import Any

from attested_cortex.errors import NotReadyError
from attested_cortex.service import hooking
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.graph_commands import KgPaths, KgQuery
from attested_cortex.service.graph_views import (
    link_view,
    paths_view,
    subgraph_view,
    timeline_view,
)
from attested_cortex.store import links as link_rows


def backend(svc: Services) -> Any:
    """The live graph backend (every build has one once the server started)."""
    if svc.graph is None:
        raise NotReadyError("no graph backend is configured")
    return svc.graph


async def query(svc: Services, caller: Caller, cmd: KgQuery) -> dict[str, Any]:
    """Memories reachable from ``start_id`` within ``depth`` hops."""
    payload = await hooking.before(svc, caller, "pre_kg_query", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(KgQuery, payload)
    async with svc.db.connection() as conn:
        graph = await backend(svc).query(conn, start_id=cmd.start_id, depth=cmd.depth,
                                         relations=cmd.relations, valid_at=cmd.valid_at)
    view = subgraph_view(graph)
    await hooking.after(svc, caller, "post_kg_query", {"query": payload, **view}, namespace=None)
    return view


async def paths(svc: Services, caller: Caller, cmd: KgPaths) -> dict[str, Any]:
    """Simple paths between two memories."""
    payload = await hooking.before(svc, caller, "pre_kg_paths", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(KgPaths, payload)
    async with svc.db.connection() as conn:
        found = await backend(svc).paths(conn, src_id=cmd.src_id, dst_id=cmd.dst_id,
                                         max_depth=cmd.max_depth, limit=cmd.limit,
                                         valid_at=cmd.valid_at)
    view = paths_view(found)
    await hooking.after(svc, caller, "post_kg_paths", {"query": payload, **view}, namespace=None)
    return view


async def timeline(svc: Services, caller: Caller, memory_id: uuid.UUID) -> dict[str, Any]:
    """A memory's links ordered by validity."""
    payload = {"operation": "timeline", "memory_id": str(memory_id)}
    await hooking.before(svc, caller, "pre_kg_query", payload, namespace=None)
    async with svc.db.connection() as conn:
        found = await backend(svc).timeline(conn, memory_id=memory_id)
    view = timeline_view(str(memory_id), found)
    await hooking.after(svc, caller, "post_kg_query", {"query": payload, **view}, namespace=None)
    return view


async def links_of(svc: Services, caller: Caller, memory_id: uuid.UUID) -> list[dict[str, Any]]:
    """Every link of a memory, history included."""
    async with svc.db.connection() as conn:
        return [link_view(link) for link in await link_rows.list_links(conn, memory_id=memory_id)]
