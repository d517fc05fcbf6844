"""Results stay bounded: big fan-outs truncate and say so, path explosions are refused (400),
identically on both backends. Graphs are bulk-loaded and mirrored with the set-based rebuild.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import psycopg
import pytest

from attested_cortex.errors import InvalidInputError
from attested_cortex.store.graph import base
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.age_setup import mirror_in_step, rebuild_mirror
from attested_cortex.store.graph.cte import CteBackend

Conn = psycopg.AsyncConnection[Any]
BOTH = (AgeBackend(), CteBackend())


async def _bulk(conn: Conn, edges: list[tuple[uuid.UUID, uuid.UUID]]) -> None:
    nodes = sorted({n for e in edges for n in e})
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO memories (id, namespace, author) VALUES (%s, 'kg', 't')",
            [(n,) for n in nodes])
        await cur.executemany(
            "INSERT INTO links (src_id, dst_id, relation, observed_by) VALUES (%s, %s,"
            " 'related_to', 't')", edges)
    await rebuild_mirror(conn)
    assert await mirror_in_step(conn)


def _layers(width: int, depth: int) -> tuple[uuid.UUID, uuid.UUID, list[Any]]:
    """src -> width nodes -> ... -> width nodes -> dst: width ** (depth - 1) paths."""
    src, dst = uuid.uuid4(), uuid.uuid4()
    layers = [[src]] + [[uuid.uuid4() for _ in range(width)] for _ in range(depth - 1)] + [[dst]]
    edges = [(a, b) for upper, lower in itertools.pairwise(layers)
             for a in upper for b in lower]
    return src, dst, edges


async def test_query_truncates_a_big_fan_out(age_conn: Conn) -> None:
    hub = uuid.uuid4()
    await _bulk(age_conn, [(hub, uuid.uuid4()) for _ in range(base.MAX_NODES + 5)])
    age, cte = [await b.query(age_conn, start_id=hub, depth=1) for b in BOTH]
    assert age == cte
    assert cte.truncated and len(cte.nodes) == base.MAX_NODES
    assert {e.dst_id for e in cte.edges} <= {n.id for n in cte.nodes}


async def test_paths_truncate_to_limit(age_conn: Conn) -> None:
    src, dst, edges = _layers(5, 4)  # 125 paths
    await _bulk(age_conn, edges)
    age, cte = [await b.paths(age_conn, src_id=src, dst_id=dst, max_depth=7) for b in BOTH]
    assert age == cte
    assert cte.truncated and len(cte.paths) == base.DEFAULT_PATHS
    everything = await BOTH[0].paths(age_conn, src_id=src, dst_id=dst, max_depth=4, limit=1000)
    assert len(everything.paths) == 125 and not everything.truncated


async def test_path_explosion_is_refused(age_conn: Conn) -> None:
    src, dst, edges = _layers(28, 4)  # 21952 paths > PATHS_SCAN_CAP
    await _bulk(age_conn, edges)
    for backend in BOTH:
        with pytest.raises(InvalidInputError):
            await backend.paths(age_conn, src_id=src, dst_id=dst, max_depth=4)
