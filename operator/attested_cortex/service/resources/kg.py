"""Knowledge-graph reads: query, paths, timeline, and the links of a memory, each a
:class:`~..pipeline.running.Call` on the live backend (AGE or CTE: the same answers). The backends
check their inputs themselves (unknown or deleted memories are 404, ranges are 400).

Read isolation: the start (and end) memories' namespaces pass the scope and rule steps;
nodes reached in namespaces the caller may not read are removed from the answer with every
edge and path that touches them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from attested_cortex.errors import NotReadyError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload, payload_with
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.service.pipeline.running import Call, Target, run, visible
from attested_cortex.service.resources import answers, cursors, native_records
from attested_cortex.service.resources.graph_commands import KgPaths, KgQuery
from attested_cortex.service.resources.graph_views import (
    link_view,
    paths_view,
    subgraph_view,
    timeline_view,
)
from attested_cortex.store import links as link_rows
from attested_cortex.store import memories as memory_rows
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.links import Link


def backend(svc: Services) -> GraphBackend:
    """The live graph backend (every build has one once the server started)."""
    if svc.graph is None:
        raise NotReadyError("no graph backend is configured")
    return svc.graph


async def memories_target(svc: Services, ids: list[uuid.UUID]) -> Target:
    """The namespaces of the memories an operation starts from (unknown ids: 404 later)."""
    async with svc.db.connection() as conn:
        found = await memory_rows.namespaces_of(conn, ids)
    return Target(tuple(sorted(set(found.values()))))


def _isolated(svc: Services, caller: Caller) -> bool:
    """Whether reads by ``caller`` may need filtering (restricted scope or enforced rules)."""
    return not caller.scopes.holds("memory.read") or (
        svc.permission_mode == "enforce" and bool(svc.policy.rules.rules))


async def hidden_ids(svc: Services, caller: Caller, spec: OperationSpec,
                     ids: set[str]) -> set[str]:
    """Of memory ``ids``, those the caller may not read (a space's records too, but for its
    authority: ADR 0083)."""
    if not ids:
        return set()
    async with svc.db.connection() as conn:
        found = await memory_rows.namespaces_of(conn, [uuid.UUID(i) for i in ids])
        records = await native_records.hidden(svc, conn, caller, found)
    isolated = _isolated(svc, caller)
    return {str(i) for i, ns in found.items()
            if i in records or (isolated and not visible(svc, caller, spec, ns))}


@dataclass
class QueryCall(Call[dict[str, Any]]):
    """``POST /v1/kg/query``: memories reachable from ``start_id`` within ``depth`` hops."""

    spec = ops.KG_QUERY
    cmd: KgQuery

    async def target(self, svc: Services, caller: Caller) -> Target:
        return await memories_target(svc, [self.cmd.start_id])

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, operation="query", **self.cmd.model_dump(mode="json"))

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        self.cmd = revalidate(KgQuery, {k: v for k, v in changed.items()
                                        if k in KgQuery.model_fields})

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        cmd = self.cmd
        async with svc.db.connection() as conn:
            graph = await backend(svc).query(conn, start_id=cmd.start_id, depth=cmd.depth,
                                             relations=cmd.relations, valid_at=cmd.valid_at)
        view = subgraph_view(graph)
        hidden = await hidden_ids(svc, caller, self.spec, {n["id"] for n in view["nodes"]})
        if hidden:
            view["nodes"] = [n for n in view["nodes"] if n["id"] not in hidden]
            view["edges"] = [e for e in view["edges"]
                             if e["src_id"] not in hidden and e["dst_id"] not in hidden]
        return view

    def post_payload(self, event: EventName, result: dict[str, Any]) -> dict[str, Any]:
        return payload_with(event, {"nodes": result["nodes"], "edges": result["edges"]},
                            operation="query", **self.cmd.model_dump(mode="json"),
                            truncated=result["truncated"])


@dataclass
class PathsCall(Call[dict[str, Any]]):
    """``POST /v1/kg/paths``: simple paths between two memories."""

    spec = ops.KG_PATHS
    cmd: KgPaths

    async def target(self, svc: Services, caller: Caller) -> Target:
        return await memories_target(svc, [self.cmd.src_id, self.cmd.dst_id])

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, **self.cmd.model_dump(mode="json"))

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        self.cmd = revalidate(KgPaths, {k: v for k, v in changed.items()
                                        if k in KgPaths.model_fields})

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        cmd = self.cmd
        async with svc.db.connection() as conn:
            found = await backend(svc).paths(conn, src_id=cmd.src_id, dst_id=cmd.dst_id,
                                             max_depth=cmd.max_depth, limit=cmd.limit,
                                             valid_at=cmd.valid_at)
        view = paths_view(found)
        inner = {n for p in view["paths"] for n in p["nodes"]}
        hidden = await hidden_ids(svc, caller, self.spec, inner)
        if hidden:
            view["paths"] = [p for p in view["paths"] if not hidden & set(p["nodes"])]
        return view

    def post_payload(self, event: EventName, result: dict[str, Any]) -> dict[str, Any]:
        return payload_with(event, {"paths": result["paths"]},
                            **self.cmd.model_dump(mode="json"), truncated=result["truncated"])


@dataclass
class TimelineCall(Call[dict[str, Any]]):
    """``GET /v1/kg/timeline``: a memory's links ordered by validity."""

    spec = ops.KG_TIMELINE
    memory_id: uuid.UUID

    async def target(self, svc: Services, caller: Caller) -> Target:
        return await memories_target(svc, [self.memory_id])

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, operation="timeline", start_id=str(self.memory_id), depth=1,
                       relations=None, valid_at=None)

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        async with svc.db.connection() as conn:
            found = await backend(svc).timeline(conn, memory_id=self.memory_id)
        view = timeline_view(str(self.memory_id), found)
        ends = {e for link in view["links"] for e in (link["src_id"], link["dst_id"])}
        hidden = await hidden_ids(svc, caller, self.spec, ends)
        if hidden:
            view["links"] = [x for x in view["links"]
                             if x["src_id"] not in hidden and x["dst_id"] not in hidden]
        return view

    def post_payload(self, event: EventName, result: dict[str, Any]) -> dict[str, Any]:
        return payload(event, operation="timeline", start_id=str(self.memory_id), depth=1,
                       relations=None, valid_at=None, nodes=[], edges=result["links"],
                       truncated=result["truncated"])


@dataclass
class LinksOfCall(Call[dict[str, Any]]):
    """``GET /v1/memories/{id}/links``: a memory's links, history included, one page after
    ``cursor`` (oldest first by creation), bounded in count and bytes (ADR 0020)."""

    spec = ops.MEMORY_LINKS
    memory_id: uuid.UUID
    limit: int = 100
    cursor: str | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        return await memories_target(svc, [self.memory_id])

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        after = cursors.decode(self.cursor) if self.cursor is not None else None
        async with svc.db.connection() as conn:
            found, more = await link_rows.page_links(conn, memory_id=self.memory_id,
                                                     limit=self.limit, after=after)
        ends = {str(e) for link in found for e in (link.src_id, link.dst_id)}
        hidden = await hidden_ids(svc, caller, self.spec, ends)
        shown = [x for x in found if str(x.src_id) not in hidden and str(x.dst_id) not in hidden]
        views = answers.fitting(shown, link_view, max_bytes=svc.limits.max_answer_bytes)
        if len(views) < len(shown):
            last: Link | None = shown[len(views) - 1]
        else:
            last = found[-1] if more and found else None
        return {"links": views, "truncated": last is not None,
                "next": None if last is None else cursors.encode((last.created_at, last.id))}


async def query(svc: Services, caller: Caller, cmd: KgQuery) -> dict[str, Any]:
    """Memories reachable from ``start_id`` within ``depth`` hops."""
    return await run(svc, caller, QueryCall(cmd))


async def paths(svc: Services, caller: Caller, cmd: KgPaths) -> dict[str, Any]:
    """Simple paths between two memories."""
    return await run(svc, caller, PathsCall(cmd))


async def timeline(svc: Services, caller: Caller, memory_id: uuid.UUID) -> dict[str, Any]:
    """A memory's links ordered by validity."""
    return await run(svc, caller, TimelineCall(memory_id))


async def links_of(svc: Services, caller: Caller, memory_id: uuid.UUID, *, limit: int = 100,
                   cursor: str | None = None) -> dict[str, Any]:
    """One page of a memory's links, history included: ``{links, truncated, next}``."""
    return await run(svc, caller, LinksOfCall(memory_id, limit, cursor))
