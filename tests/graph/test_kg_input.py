"""kg/query, kg/paths and kg/timeline refuse bad input the same way on both backends."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import psycopg
import pytest

from attested_cortex.errors import InvalidInputError, NotFoundError
from attested_cortex.store import links
from attested_cortex.store.graph.base import GraphBackend
from tests.graph.corpus import add_memories, tombstone

Conn = psycopg.AsyncConnection[Any]


@pytest.fixture
async def pair(age_conn: Conn, backend: GraphBackend) -> tuple[uuid.UUID, uuid.UUID]:
    a, b = await add_memories(age_conn, 2, graph=backend)
    await links.create_link(age_conn, graph=backend, src_id=a, dst_id=b, relation="related_to",
                            observed_by="t")
    return a, b


@pytest.mark.parametrize("depth", [0, 6, -1, True, 2.0, "3"])
async def test_depth_out_of_range(age_conn: Conn, backend: GraphBackend, pair: Any,
                                  depth: Any) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await backend.query(age_conn, start_id=pair[0], depth=depth)
    assert caught.value.details["field"] == "depth"


@pytest.mark.parametrize(("max_depth", "limit", "field"),
                         [(0, 10, "max_depth"), (8, 10, "max_depth"), (3, 0, "limit"),
                          (3, 1001, "limit")])
async def test_paths_ranges(age_conn: Conn, backend: GraphBackend, pair: Any, max_depth: int,
                            limit: int, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await backend.paths(age_conn, src_id=pair[0], dst_id=pair[1], max_depth=max_depth,
                            limit=limit)
    assert caught.value.details["field"] == field


async def test_bad_relation_filter_and_naive_instant(age_conn: Conn, backend: GraphBackend,
                                                     pair: Any) -> None:
    with pytest.raises(InvalidInputError):
        await backend.query(age_conn, start_id=pair[0], depth=1, relations=["x-ok", "nope"])
    with pytest.raises(InvalidInputError):
        await backend.query(age_conn, start_id=pair[0], depth=1, valid_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError):
        await backend.paths(age_conn, src_id=pair[0], dst_id=pair[0], max_depth=3)


async def test_unknown_and_tombstoned_ids_are_404(age_conn: Conn, backend: GraphBackend,
                                                  pair: Any) -> None:
    a, b = pair
    await tombstone(age_conn, b, graph=backend)
    for missing in (uuid.uuid4(), b):
        with pytest.raises(NotFoundError):
            await backend.query(age_conn, start_id=missing, depth=1)
        with pytest.raises(NotFoundError):
            await backend.timeline(age_conn, memory_id=missing)
        with pytest.raises(NotFoundError):
            await backend.paths(age_conn, src_id=a, dst_id=missing, max_depth=2)
        with pytest.raises(NotFoundError):
            await backend.paths(age_conn, src_id=missing, dst_id=a, max_depth=2)


async def test_tombstoned_memory_leaves_the_graph(age_conn: Conn, backend: GraphBackend,
                                                  pair: Any) -> None:
    a, b = pair
    (c,) = await add_memories(age_conn, 1, graph=backend)
    await links.create_link(age_conn, graph=backend, src_id=b, dst_id=c, relation="related_to",
                            observed_by="t")
    assert len((await backend.query(age_conn, start_id=a, depth=2)).nodes) == 3
    await tombstone(age_conn, b, graph=backend)
    got = await backend.query(age_conn, start_id=a, depth=2)
    assert [n.id for n in got.nodes] == [a] and got.edges == ()
    assert (await backend.paths(age_conn, src_id=a, dst_id=c, max_depth=3)).paths == ()
    assert (await backend.timeline(age_conn, memory_id=a)).links == ()
