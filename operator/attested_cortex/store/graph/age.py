"""The Apache AGE graph backend: Cypher through ``ag_catalog.cypher`` over a mirrored graph.

Chosen by ``selecting.select_backend`` for ``AGE`` (and never silently otherwise); called by the
service layer for kg/query, kg/paths and kg/timeline and by ``store.links`` and the memory write
path for the mirroring hooks. Sessions must be prepared by ``age_setup.configure_age_connection``.

Engineering (measured in docs/benchmarks/kg.json): traversals expand one fixed hop per level
(``MATCH (a)-[e:link]->(b) WHERE a.id IN [...]``, planned as index scans) instead of AGE's
variable-length ``[*1..n]`` machinery; writes go straight into the label tables through the
uuid expression indexes, in the caller's transaction, so a failed write leaves neither side
changed. Tombstoned memories are removed from the graph with their edges.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from attested_cortex.store.graph import base, preparing
from attested_cortex.store.graph import cypher as cy
from attested_cortex.store.graph.base import (
    BackendName,
    Edge,
    Path,
    PathSet,
    Subgraph,
    Timeline,
)
from attested_cortex.store.graph.walking import LevelWalk
from attested_cortex.store.links import fetch_tuples

if TYPE_CHECKING:
    import psycopg

    from attested_cortex.store.links import Link

    Conn = psycopg.AsyncConnection[Any]
    Hop = tuple[uuid.UUID, uuid.UUID, uuid.UUID, str]

_EQ: Final = "OPERATOR(ag_catalog.=)"
_UPSERT_VERTICES: Final = (
    f"INSERT INTO {cy.VERTEX} (properties)"
    " SELECT p::ag_catalog.agtype FROM unnest(%s::text[]) AS p"
    f" ON CONFLICT (({cy.ID_EXPR})) DO NOTHING"
)
_INSERT_EDGE: Final = (
    f"INSERT INTO {cy.EDGE} (start_id, end_id, properties)"
    " SELECT s.id, d.id, %(props)s::ag_catalog.agtype"
    f" FROM {cy.VERTEX} s, {cy.VERTEX} d"
    f" WHERE {cy.id_expr('s')} {_EQ} %(src)s::ag_catalog.agtype"
    f" AND {cy.id_expr('d')} {_EQ} %(dst)s::ag_catalog.agtype"
)
_UPDATE_EDGE: Final = (
    f"UPDATE {cy.EDGE} SET properties = %(props)s::ag_catalog.agtype"
    f" WHERE {cy.ID_EXPR} {_EQ} %(key)s::ag_catalog.agtype"
)
_DETACH_VERTEX: Final = (
    f"WITH v AS (SELECT id FROM {cy.VERTEX} WHERE {cy.ID_EXPR} {_EQ} %(key)s::ag_catalog.agtype),"
    f" gone AS (DELETE FROM {cy.EDGE} WHERE start_id IN (SELECT id FROM v)"
    " OR end_id IN (SELECT id FROM v) RETURNING 1)"
    f" DELETE FROM {cy.VERTEX} WHERE id IN (SELECT id FROM v)"
)


async def _hop(
    conn: Conn, frontier: Iterable[uuid.UUID], *, where: str, direction: cy.Direction
) -> list[Hop]:
    rows = await fetch_tuples(conn, cy.hop_sql(frontier, where=where, direction=direction))
    return [cy.parse_hop(row) for row in rows]


class AgeBackend:
    """Cypher over the ``cortex_graph`` mirror of the links table."""

    @property
    def name(self) -> BackendName:
        return "age"

    @property
    def mirrors_writes(self) -> bool:
        """Yes: every write also changes the ``cortex_graph`` mirror, in the same transaction."""
        return True

    async def query(
        self, conn: Conn, *, start_id: uuid.UUID, depth: int,
        relations: Sequence[str] | None = None, valid_at: datetime | None = None,
    ) -> Subgraph:
        async with preparing.snapshot(conn):
            req = await preparing.prepare_query(
                conn, start_id=start_id, depth=depth, relations=relations, valid_at=valid_at
            )
            where = cy.active(cy.micros(req.instant), req.relations)
            walk = LevelWalk(start_id, depth)
            while walk.frontier:
                hops = await _hop(conn, walk.frontier, where=where, direction="out")
                walk.add_level(Edge(e, a, b, r) for a, e, b, r in hops)
        return walk.result()

    async def paths(
        self, conn: Conn, *, src_id: uuid.UUID, dst_id: uuid.UUID,
        max_depth: int, limit: int = base.DEFAULT_PATHS, valid_at: datetime | None = None,
    ) -> PathSet:
        req = await preparing.prepare_paths(
            conn, src_id=src_id, dst_id=dst_id, max_depth=max_depth, limit=limit,
            valid_at=valid_at,
        )
        where = cy.active(cy.micros(req.instant), None)
        dist = await _distances(conn, dst_id, max_depth=max_depth, where=where)
        found = await _enumerate(conn, src_id, dst_id, dist=dist, max_depth=max_depth,
                                 where=where) if src_id in dist else []
        return base.bound_paths(found, limit=limit)

    async def timeline(self, conn: Conn, *, memory_id: uuid.UUID) -> Timeline:
        await preparing.prepare_timeline(conn, memory_id=memory_id)
        hops = await _hop(conn, [memory_id], where="true", direction="both")
        return base.bound_timeline(await preparing.fetch_links(conn, [h[1] for h in hops]))

    async def on_memory_created(
        self, conn: Conn, memory_id: uuid.UUID, namespace: str
    ) -> None:
        await conn.execute(_UPSERT_VERTICES, ([cy.vertex_properties(memory_id)],))

    async def on_memory_tombstoned(self, conn: Conn, memory_id: uuid.UUID) -> None:
        await conn.execute(_DETACH_VERTEX, {"key": cy.id_key(memory_id)})

    async def on_link_created(self, conn: Conn, link: Link) -> None:
        ends = [cy.vertex_properties(link.src_id), cy.vertex_properties(link.dst_id)]
        await conn.execute(_UPSERT_VERTICES, (ends,))
        await conn.execute(_INSERT_EDGE, {
            "props": cy.edge_properties(link),
            "src": cy.id_key(link.src_id), "dst": cy.id_key(link.dst_id),
        })

    async def on_link_invalidated(self, conn: Conn, link: Link) -> None:
        await conn.execute(
            _UPDATE_EDGE, {"props": cy.edge_properties(link), "key": cy.id_key(link.id)}
        )


async def _distances(
    conn: Conn, dst_id: uuid.UUID, *, max_depth: int, where: str
) -> dict[uuid.UUID, int]:
    """Fewest hops from each memory to ``dst_id`` (backward BFS, at most ``max_depth``)."""
    dist, frontier = {dst_id: 0}, [dst_id]
    for level in range(1, max_depth + 1):
        if not frontier:
            break
        hops = await _hop(conn, frontier, where=where, direction="in")
        frontier = [b for b in dict.fromkeys(h[2] for h in hops) if b not in dist]
        dist.update(dict.fromkeys(frontier, level))
    return dist


async def _enumerate(
    conn: Conn, src_id: uuid.UUID, dst_id: uuid.UUID, *,
    dist: dict[uuid.UUID, int], max_depth: int, where: str,
) -> list[Path]:
    """Every simple path src -> dst, extending only hops that can still arrive in time."""
    partial: list[tuple[tuple[uuid.UUID, ...], tuple[uuid.UUID, ...]]] = [((src_id,), ())]
    complete: list[Path] = []
    for hop in range(1, max_depth + 1):
        if not partial:
            break
        out: defaultdict[uuid.UUID, list[tuple[uuid.UUID, uuid.UUID]]] = defaultdict(list)
        for a, e, b, _ in await _hop(conn, {p[0][-1] for p in partial}, where=where,
                                     direction="out"):
            if b in dist and hop + dist[b] <= max_depth:
                out[a].append((e, b))
        grown = [((*nodes, b), (*links, e)) for nodes, links in partial
                 for e, b in out[nodes[-1]] if b not in nodes]
        complete.extend(
            Path(hops=hop, links=lk, nodes=nd) for nd, lk in grown if nd[-1] == dst_id
        )
        partial = [(nd, lk) for nd, lk in grown if nd[-1] != dst_id]
        if len(complete) > base.PATHS_SCAN_CAP or len(partial) > base.PATHS_SCAN_CAP * 10:
            raise base.too_many_paths(max_depth)
    return complete
