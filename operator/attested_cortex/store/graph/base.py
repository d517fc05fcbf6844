"""The graph backend interface, its result values, its bounds and its pure shaping rules.

Implemented by ``cte.CteBackend`` and ``age.AgeBackend``; chosen by ``selecting.select_backend``;
called by the service layer (kg/query, kg/paths, kg/timeline) and by ``store.links`` (write
mirroring hooks). Both backends shape their raw answer with ``walking.LevelWalk`` (kg/query) and
``bound_paths`` / ``bound_timeline`` here, so ordering and truncation are identical whichever
backend ran.

Semantics (docs/graph.md): traversal follows links from ``src`` to ``dst``; a link counts at
instant ``t`` when ``valid_from <= t < valid_until`` (open windows never close); tombstoned
memories are absent from the graph: never a node, never passed through, 404 as an endpoint.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

from attested_cortex.errors import InvalidInputError

if TYPE_CHECKING:
    import psycopg

    from attested_cortex.store.links import Link

BackendName = Literal["age", "cte"]
RequestedBackend = Literal["Auto", "AGE", "CTE"]

MAX_QUERY_DEPTH: Final = 5
MAX_PATH_DEPTH: Final = 7
#: kg/query answers at most this many nodes and edges; beyond that it truncates and says so.
MAX_NODES: Final = 2000
MAX_EDGES: Final = 5000
#: kg/paths returns at most ``limit`` paths (default 100, at most MAX_PATHS) ...
DEFAULT_PATHS: Final = 100
MAX_PATHS: Final = 1000
#: ... and refuses (400) a request whose simple paths number more than PATHS_SCAN_CAP.
PATHS_SCAN_CAP: Final = 20000
#: kg/timeline answers at most this many links, oldest window first.
MAX_TIMELINE: Final = 5000


class Node(NamedTuple):
    """A memory reached by kg/query, with its fewest-hops distance from the start.

    A NamedTuple, not a frozen dataclass: a depth-5 answer builds thousands of these, and
    a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) dominated it.
    """

    depth: int
    id: uuid.UUID


class Edge(NamedTuple):
    """A link that kg/query walked (its window holds at the query's instant)."""

    id: uuid.UUID
    src_id: uuid.UUID
    dst_id: uuid.UUID
    relation: str


@dataclass(frozen=True, slots=True)
class Subgraph:
    """kg/query's answer: nodes ordered by (depth, id), edges by id."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class Path:
    """One simple path: the links taken in order (parallel links give distinct paths)."""

    hops: int
    links: tuple[uuid.UUID, ...]
    nodes: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class PathSet:
    """kg/paths' answer: shortest first, then by link ids; ``truncated`` if more existed."""

    paths: tuple[Path, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class Timeline:
    """kg/timeline's answer: links ordered by (valid_from, valid_until open last, id)."""

    links: tuple[Link, ...]
    truncated: bool


class GraphBackend(Protocol):
    """Traversals over the live links, plus hooks that keep a mirrored graph in step."""

    @property
    def name(self) -> BackendName: ...

    @property
    def mirrors_writes(self) -> bool:
        """Whether the ``on_*`` hooks write (into a mirror kept in the writer's transaction)."""
        ...

    async def query(
        self, conn: psycopg.AsyncConnection[Any], *, start_id: uuid.UUID, depth: int,
        relations: Sequence[str] | None = None, valid_at: datetime | None = None,
    ) -> Subgraph: ...

    async def paths(
        self, conn: psycopg.AsyncConnection[Any], *, src_id: uuid.UUID, dst_id: uuid.UUID,
        max_depth: int, limit: int = DEFAULT_PATHS, valid_at: datetime | None = None,
    ) -> PathSet: ...

    async def timeline(
        self, conn: psycopg.AsyncConnection[Any], *, memory_id: uuid.UUID
    ) -> Timeline: ...

    async def on_memory_created(
        self, conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID, namespace: str
    ) -> None: ...

    async def on_memory_tombstoned(
        self, conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID
    ) -> None: ...

    async def on_link_created(self, conn: psycopg.AsyncConnection[Any], link: Link) -> None: ...

    async def on_link_invalidated(
        self, conn: psycopg.AsyncConnection[Any], link: Link
    ) -> None: ...


def check_range(value: int, *, field: str, low: int, high: int) -> int:
    """Return ``value`` if ``low <= value <= high``, else raise 400 naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(
            f"{field} must be an integer from {low} to {high}", field=field, value=value
        )
    return value


def check_instant(valid_at: datetime | None) -> None:
    """Refuse a naive ``valid_at`` (400): an instant needs a time zone offset."""
    if valid_at is not None and valid_at.tzinfo is None:
        raise InvalidInputError("valid_at needs a time zone offset", field="valid_at")


def bound_paths(paths: Iterable[Path], *, limit: int) -> PathSet:
    """Order paths (fewest hops, then link ids) and keep the first ``limit``."""
    ordered = sorted(paths, key=lambda p: (p.hops, [link.int for link in p.links]))
    return PathSet(paths=tuple(ordered[:limit]), truncated=len(ordered) > limit)


def bound_timeline(links: Iterable[Link]) -> Timeline:
    """Order a memory's links by validity and keep the first MAX_TIMELINE."""
    ordered = sorted(links, key=_timeline_key)
    return Timeline(links=tuple(ordered[:MAX_TIMELINE]), truncated=len(ordered) > MAX_TIMELINE)


def _timeline_key(link: Link) -> tuple[datetime, bool, datetime, int]:
    until = link.valid_until or link.valid_from
    return (link.valid_from, link.valid_until is None, until, link.id.int)


def too_many_paths(max_depth: int) -> InvalidInputError:
    """The 400 raised when a kg/paths request would enumerate more than PATHS_SCAN_CAP."""
    return InvalidInputError(
        f"more than {PATHS_SCAN_CAP} simple paths within {max_depth} hops; lower max_depth",
        field="max_depth", value=max_depth,
    )
