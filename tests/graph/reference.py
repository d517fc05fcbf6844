"""A plain-Python reference of the graph semantics (docs/graph.md), for the equivalence tests.

Used by test_equivalence.py and test_random_graphs.py to check both backends against an
independent, obviously-correct traversal over in-memory link records.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RefLink:
    """The parts of a link the traversals look at."""

    id: uuid.UUID
    src: uuid.UUID
    dst: uuid.UUID
    relation: str
    valid_from: datetime
    valid_until: datetime | None


def _live(links: Iterable[RefLink], live: Collection[uuid.UUID], at: datetime,
          relations: Collection[str] | None = None) -> list[RefLink]:
    return [
        lk for lk in links
        if lk.src in live and lk.dst in live
        and lk.valid_from <= at and (lk.valid_until is None or at < lk.valid_until)
        and (relations is None or lk.relation in relations)
    ]


def query(links: Iterable[RefLink], live: Collection[uuid.UUID], *, start: uuid.UUID,
          depth: int, at: datetime, relations: Collection[str] | None = None,
          ) -> tuple[dict[uuid.UUID, int], set[uuid.UUID]]:
    """Breadth-first: nodes with their fewest hops, and every edge out of a node below depth."""
    usable = _live(links, live, at, relations)
    nodes = {start: 0}
    for level in range(1, depth + 1):
        for lk in usable:
            if nodes.get(lk.src) == level - 1 and lk.dst not in nodes:
                nodes[lk.dst] = level
    edges = {lk.id for lk in usable if lk.src in nodes and nodes[lk.src] < depth}
    return nodes, edges


def paths(links: Iterable[RefLink], live: Collection[uuid.UUID], *, src: uuid.UUID,
          dst: uuid.UUID, max_depth: int, at: datetime) -> set[tuple[uuid.UUID, ...]]:
    """Every simple path (as its link ids) from src to dst with at most max_depth hops."""
    usable = _live(links, live, at)
    found: set[tuple[uuid.UUID, ...]] = set()

    def walk(node: uuid.UUID, seen: tuple[uuid.UUID, ...], taken: tuple[uuid.UUID, ...]) -> None:
        if node == dst and taken:
            found.add(taken)
            return
        if len(taken) == max_depth:
            return
        for lk in usable:
            if lk.src == node and lk.dst not in seen:
                walk(lk.dst, (*seen, lk.dst), (*taken, lk.id))

    walk(src, (src,), ())
    return found


def timeline(links: Iterable[RefLink], live: Collection[uuid.UUID], *,
             memory: uuid.UUID) -> set[uuid.UUID]:
    """Ids of every link touching memory whose both ends are live, whatever its window."""
    return {lk.id for lk in links if memory in (lk.src, lk.dst)
            and lk.src in live and lk.dst in live}
