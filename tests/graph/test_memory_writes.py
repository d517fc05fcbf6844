"""Storing a memory through the service layer, with and without a graph mirror to write.

With ``AGE`` the store also writes the memory's vertex, in the insert's transaction, so a failed
mirror write leaves neither side changed. With ``CTE`` a store is one INSERT and runs without an
explicit transaction (no BEGIN/COMMIT round trips): one statement is all or nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from attested_cortex.service.pipeline.context import Caller
from attested_cortex.service.resources import memories
from attested_cortex.service.resources.commands import StoreMemory
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.cypher import VERTEX
from attested_cortex.types import AgentId
from tests.support.cortex import MakeCortex

CALLER = Caller(AgentId("agent-1"), "dev")


class _FailingMirror(AgeBackend):
    """Writes the vertex, then fails: the insert and the vertex must both be rolled back."""

    async def on_memory_created(
        self, conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID, namespace: str
    ) -> None:
        await super().on_memory_created(conn, memory_id, namespace)
        raise RuntimeError("mirror failed")


def _counts(dsn: str) -> tuple[int, int]:
    """(memories, memory vertices in the AGE mirror)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT (SELECT count(*) FROM memories),"
                           f" (SELECT count(*) FROM {VERTEX})").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.parametrize(("backend", "vertices"), [("AGE", 1), ("CTE", 0)])
async def test_a_store_writes_the_memory_and_its_vertex_only_when_mirrored(
    make_cortex: MakeCortex, age_dsn: str, backend: str, vertices: int,
) -> None:
    client = await make_cortex(age_dsn, graph_backend=backend)
    stored = await memories.store(client.services, CALLER,
                                  StoreMemory(namespace="team/a", content="hello"))
    assert stored.author == "agent-1"
    assert _counts(age_dsn) == (1, vertices)


async def test_a_failed_mirror_write_leaves_neither_side_changed(
    make_cortex: MakeCortex, age_dsn: str,
) -> None:
    client = await make_cortex(age_dsn, graph_backend="AGE")
    svc = replace(client.services, graph=_FailingMirror())
    with pytest.raises(RuntimeError, match="mirror failed"):
        await memories.store(svc, CALLER, StoreMemory(namespace="team/a", content="hello"))
    assert _counts(age_dsn) == (0, 0)
