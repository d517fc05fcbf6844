"""kg/query's breadth-first walk: the pure state both backends feed one level of hops at a time.

A backend asks for ``walk.frontier``, fetches the active links out of those memories in one
set-based statement (SQL for ``cte``, a fixed-hop Cypher match for ``age``), and hands the rows
to ``add_level``; ``result`` then shapes the answer, so ordering and truncation are identical
whichever backend ran. Why level by level rather than one recursive CTE (ADR 0006): the walk
keeps the set of memories already reached, so each memory's links are read once, and it stops
as soon as the MAX_NODES cut is decided instead of expanding levels no answer can show.

Semantics (docs/graph.md): a node's depth is its fewest hops from the start; the edges are every
active link out of a node below the requested depth; nodes are ordered by (depth, id) and cut
to MAX_NODES, edges are those between kept nodes, ordered by id and cut to MAX_EDGES.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, cast

from attested_cortex.store.graph.base import MAX_EDGES, MAX_NODES, Edge, Node, Subgraph

if TYPE_CHECKING:
    from psycopg.rows import RowMaker

# C-level keys: uuid.UUID's hash and comparisons are Python methods, its ``int`` slot is not.
_BY_INT: Final = attrgetter("int")
_DST: Final = attrgetter("dst_id")
_BY_LINK_ID: Final = attrgetter("id.int")


#: Edge from a (link id, src_id, dst_id, relation) row with no Python-level call:
#: ``tuple.__new__`` bound in a ``partial`` is C all the way, where one ``Edge._make`` per row
#: was a tenth of a depth-5 query's time. See ``edge_rows``.
make_edge: Final = cast("RowMaker[Edge]", partial(tuple.__new__, Edge))


def edge_rows(cursor: Any) -> RowMaker[Edge]:
    """psycopg row factory: a level's rows arrive as Edges, built inside the row loader."""
    return make_edge


class LevelWalk:
    """Nodes reached so far by level, the links walked, and the next frontier to expand.

    ``max_nodes`` exists for tests; the service always walks with MAX_NODES.
    """

    def __init__(self, start_id: uuid.UUID, depth: int, *, max_nodes: int = MAX_NODES) -> None:
        self._depth = depth
        self._max_nodes = max_nodes
        self._seen = {start_id.int}
        self._levels: list[list[uuid.UUID]] = [[start_id]]
        self._rows: list[Edge] = []
        self._frontier = [start_id]
        self._reached_before_frontier = 0  # nodes at depths below the frontier's

    @property
    def frontier(self) -> list[uuid.UUID]:
        """The memories whose outgoing links come next; empty once the walk is over."""
        return self._frontier

    def add_level(self, rows: Iterable[Edge]) -> None:
        """Take the active links out of the current frontier (to live memories only)."""
        level = len(self._levels)
        walked = list(rows)
        self._rows.extend(walked)
        # Set arithmetic on integer keys: every per-row step runs in C.
        dsts = list(map(_DST, walked))
        by_key = dict(zip(map(_BY_INT, dsts), dsts, strict=True))
        fresh = by_key.keys() - self._seen
        self._seen |= fresh
        reached = list(map(by_key.__getitem__, fresh))
        if reached:
            self._levels.append(reached)
        self._reached_before_frontier += len(self._frontier)
        # Once the shallower levels alone fill MAX_NODES, no deeper node can be kept: the
        # level just found only tells whether the answer is truncated, so expanding stops.
        done = (not reached or level >= self._depth
                or self._reached_before_frontier >= self._max_nodes)
        self._frontier = [] if done else reached

    def result(self) -> Subgraph:
        """The answer: ordered, cut to the bounds, and flagged when anything was left out."""
        nodes: list[Node] = []
        for depth, ids in enumerate(self._levels):
            ids.sort(key=_BY_INT)
            nodes.extend(map(tuple.__new__, repeat(Node), zip(repeat(depth), ids)))
        truncated = len(nodes) > self._max_nodes
        if truncated:
            del nodes[self._max_nodes:]
            kept = {node.id.int for node in nodes}
            rows = [r for r in self._rows if r.src_id.int in kept and r.dst_id.int in kept]
        else:  # every walked link joins two reached nodes
            rows = list(self._rows)
        rows.sort(key=_BY_LINK_ID)
        if len(rows) > MAX_EDGES:
            truncated = True
            del rows[MAX_EDGES:]
        return Subgraph(nodes=tuple(nodes), edges=tuple(rows), truncated=truncated)
