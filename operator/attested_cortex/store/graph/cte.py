"""The relational ("CTE") graph backend: traversals in plain PostgreSQL over the links table.

Always available; chosen by ``selecting.select_backend`` for ``CTE`` and for ``Auto`` (see
docs/adr/0003-graph-backend-auto.md). Called by the service layer for kg/query, kg/paths and
kg/timeline, and by ``store.links`` for the write hooks, which are no-ops here because the
relational tables are the graph. kg/query walks one set-based statement per level inside one
read-only snapshot (``walking.LevelWalk``, ADR 0006); kg/paths is a recursive CTE pruned by
backward distances. Semantics and bounds live in ``base``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from attested_cortex.store.graph import base, preparing
from attested_cortex.store.graph.base import BackendName, Path, PathSet, Subgraph, Timeline
from attested_cortex.store.graph.walking import LevelWalk, edge_rows
from attested_cortex.store.links import fetch_tuples

if TYPE_CHECKING:
    import psycopg

    from attested_cortex.store.links import Link

_ACTIVE: Final = (
    "l.valid_from <= %(t)s AND (l.valid_until IS NULL OR %(t)s < l.valid_until)"
    " AND (%(rels)s::text[] IS NULL OR l.relation = ANY(%(rels)s::text[]))"
)

_LIVE_DST: Final = (
    "NOT EXISTS (SELECT 1 FROM memories t WHERE t.id = l.dst_id AND t.deleted_at IS NOT NULL)"
)
_LIVE_SRC: Final = _LIVE_DST.replace("l.dst_id", "l.src_id")

# One level of kg/query's walk (walking.LevelWalk): the active links out of the frontier to live
# memories. The frontier travels as a binary uuid[] (parsing a text array of a few hundred
# uuids cost more than the lookups). ``src_id = ANY(array)`` is one index-only scan of the
# covering index that visits the keys in order (PostgreSQL 17's array-key B-tree scans): on a
# 418-memory frontier it ran 3.3 ms against 3.6-4.0 ms for the same probes as a nested loop
# over ``unnest``, and a depth-5 walk 0.9 ms faster at the median (ADR 0006).
LEVEL_SQL: Final = f"""
SELECT l.id, l.src_id, l.dst_id, l.relation
FROM links l
WHERE l.src_id = ANY(%(frontier)b::uuid[]) AND {_ACTIVE} AND {_LIVE_DST}
"""

# Backward distances to dst prune the forward enumeration to hops that can still arrive.
PATHS_SQL: Final = f"""
WITH RECURSIVE back(id, dist) AS (
    SELECT %(dst)s::uuid, 0
  UNION
    SELECT l.src_id, b.dist + 1
    FROM back b
    JOIN links l ON l.dst_id = b.id
    WHERE b.dist < %(max)s AND {_ACTIVE} AND {_LIVE_SRC}
), near AS (
    SELECT id, min(dist) AS dist FROM back GROUP BY id
), fwd(node, nodes, links, hops) AS (
    SELECT %(src)s::uuid, ARRAY[%(src)s::uuid], ARRAY[]::uuid[], 0
  UNION ALL
    SELECT l.dst_id, f.nodes || l.dst_id, f.links || l.id, f.hops + 1
    FROM fwd f
    JOIN links l ON l.src_id = f.node
    JOIN near n ON n.id = l.dst_id
    WHERE f.node <> %(dst)s AND f.hops + 1 + n.dist <= %(max)s
      AND l.dst_id <> ALL(f.nodes) AND {_ACTIVE}
)
SELECT nodes, links FROM fwd WHERE node = %(dst)s AND hops > 0
LIMIT %(cap)s
"""

TIMELINE_SQL: Final = """
SELECT l.id FROM links l
JOIN memories s ON s.id = l.src_id AND s.deleted_at IS NULL
JOIN memories d ON d.id = l.dst_id AND d.deleted_at IS NULL
WHERE l.src_id = %(m)s OR l.dst_id = %(m)s
"""


class CteBackend:
    """Recursive common table expressions over ``links`` joined to live ``memories``."""

    @property
    def name(self) -> BackendName:
        return "cte"

    @property
    def mirrors_writes(self) -> bool:
        """No: the relational tables are the graph, so the ``on_*`` hooks do nothing."""
        return False

    async def query(
        self, conn: psycopg.AsyncConnection[Any], *, start_id: uuid.UUID, depth: int,
        relations: Sequence[str] | None = None, valid_at: datetime | None = None,
    ) -> Subgraph:
        async with preparing.snapshot(conn):
            req = await preparing.prepare_query(
                conn, start_id=start_id, depth=depth, relations=relations, valid_at=valid_at
            )
            walk = LevelWalk(start_id, depth)
            params: dict[str, Any] = {"t": req.instant, "rels": req.relations}
            async with conn.cursor(binary=True, row_factory=edge_rows) as cur:
                while walk.frontier:
                    params["frontier"] = walk.frontier
                    await cur.execute(LEVEL_SQL, params)
                    walk.add_level(await cur.fetchall())
        return walk.result()

    async def paths(
        self, conn: psycopg.AsyncConnection[Any], *, src_id: uuid.UUID, dst_id: uuid.UUID,
        max_depth: int, limit: int = base.DEFAULT_PATHS, valid_at: datetime | None = None,
    ) -> PathSet:
        req = await preparing.prepare_paths(
            conn, src_id=src_id, dst_id=dst_id, max_depth=max_depth, limit=limit,
            valid_at=valid_at,
        )
        params = {"src": src_id, "dst": dst_id, "max": max_depth, "t": req.instant,
                  "rels": None, "cap": base.PATHS_SCAN_CAP + 1}
        rows = await fetch_tuples(conn, PATHS_SQL, params)
        if len(rows) > base.PATHS_SCAN_CAP:
            raise base.too_many_paths(max_depth)
        found = (Path(hops=len(lk), links=tuple(lk), nodes=tuple(nd)) for nd, lk in rows)
        return base.bound_paths(found, limit=limit)

    async def timeline(
        self, conn: psycopg.AsyncConnection[Any], *, memory_id: uuid.UUID
    ) -> Timeline:
        await preparing.prepare_timeline(conn, memory_id=memory_id)
        ids = [row[0] for row in await fetch_tuples(conn, TIMELINE_SQL, {"m": memory_id})]
        return base.bound_timeline(await preparing.fetch_links(conn, ids))

    async def on_memory_created(
        self, conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID, namespace: str
    ) -> None:
        """Nothing to mirror: the relational tables are the graph."""

    async def on_memory_tombstoned(
        self, conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID
    ) -> None:
        """Nothing to mirror: traversals join ``memories.deleted_at IS NULL``."""

    async def on_link_created(self, conn: psycopg.AsyncConnection[Any], link: Link) -> None:
        """Nothing to mirror."""

    async def on_link_invalidated(self, conn: psycopg.AsyncConnection[Any], link: Link) -> None:
        """Nothing to mirror."""
