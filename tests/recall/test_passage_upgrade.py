"""Long memories stored before their model cut windows get them from the backfill
(docs/adr/0140): after an upgrade recall finds an old long memory by its best passage, as
it finds one written since. PostgreSQL 17 + pgvector, the server over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from hack.support.waiting import await_until

from attested_cortex.embedding import default
from attested_cortex.store import embeddings as rows
from attested_cortex.store.embeddings import vector_literal
from attested_cortex.store.migrating import migrate
from attested_cortex.store.schema import MIGRATIONS
from tests.recall.test_hybrid import recall
from tests.recall.test_passages import FREEZE, GARDEN, OTHERS, passages_of
from tests.support.cortex import MakeCortex
from tests.support.postgres import Database

#: Past the byte floor and well inside one window: looked at once, stays one passage.
MEDIUM = "The tomatoes in bed four want staking before the wind picks up this week."


#: A memory a server of ADR 0136 already gave windows (two passages here, by SQL).
WINDOWED = f"{GARDEN} The greenhouse door sticks in the cold."


def store_as_before(dsn: str, texts: list[str], *, windows: int = 1) -> list[str]:
    """Memories and their whole-text vector each, as a server before migration 0041 left
    them (``windows`` rows a memory: 1 before ADR 0136)."""
    embedder = default.DefaultEmbedder()
    ids = [str(uuid.uuid4()) for _ in texts]
    with psycopg.connect(dsn) as conn:
        for memory_id, text, vector in zip(ids, texts, embedder.embed_now(texts), strict=True):
            conn.execute("INSERT INTO memories (id, namespace, content, author) "
                         "VALUES (%s, 'kb', %s, 'dev:tester')", (memory_id, text))
            for passage in range(windows):
                conn.execute("INSERT INTO memory_embeddings (memory_id, passage, model, dim, "
                             "revision, embedding) VALUES (%s, %s, %s, %s, 1, %s::vector)",
                             (memory_id, passage, default.MODEL, default.DIMENSION,
                              vector_literal(vector)))
    return ids


def embedded_at(dsn: str, memory_id: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT embedded_at FROM memory_embeddings "
                           "WHERE memory_id = %s AND passage = 0", (memory_id,)).fetchone()
    assert row is not None
    return row[0]


async def test_the_backfill_gives_old_long_memories_their_windows_once(
        age_database: Database, make_cortex: MakeCortex) -> None:
    dsn = age_database.dsn
    scheme = next(m.version for m in MIGRATIONS if m.name == "embedding_passage_scheme")
    await migrate(dsn, target=max(m.version for m in MIGRATIONS if m.version < scheme))
    target, medium, *short = store_as_before(dsn, [f"{GARDEN} {FREEZE}", MEDIUM, *OTHERS])
    (windowed,) = store_as_before(dsn, [WINDOWED], windows=2)
    short_at, windowed_at = embedded_at(dsn, short[0]), embedded_at(dsn, windowed)
    await migrate(dsn)
    cortex = await make_cortex(dsn, migrated=False, embedder="default")

    async def upgraded() -> dict[str, Any] | None:
        part = (await cortex.call("GET", "/v1/capabilities")).body["recall"]["backfill"]
        done = part["state"] == "idle" and part["embedded"] == 2 and part["pending"] == 0
        return part if done else None

    await await_until(upgraded, what="the old long memories given their windows", seconds=60)
    # the long memory has its windows, found by its last one (its whole text's mean ranks
    # it below the cafeteria: tests/recall/test_passages.py)
    assert passages_of(dsn, target) > 10
    body = await recall(cortex, "when do we stop shipping releases?", explain=True)
    first = body["results"][0]
    assert first["id"] == target, body["results"]
    assert first["explain"]["vector"]["similarity"] > 0.11
    # a memory of one window stays one passage; one under the byte floor is not read at all
    assert passages_of(dsn, medium) == 1
    assert embedded_at(dsn, short[0]) == short_at
    # a memory that had its windows already is current: not embedded again
    assert embedded_at(dsn, windowed) == windowed_at and passages_of(dsn, windowed) == 2
    # and the next pass finds nothing: what the backfill counts before it walks is zero
    async with await psycopg.AsyncConnection.connect(
            dsn, row_factory=psycopg.rows.dict_row) as conn:
        assert await rows.count_stale(conn, model=default.MODEL, dim=default.DIMENSION,
                                      windows=True) == 0


async def test_a_server_on_a_schema_before_the_scheme_still_embeds(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # a server may run before its migration (a rolling upgrade): its rows go without the
    # scheme (0 once migrated, so the next server looks at them once) and it asks for none
    dsn = age_database.dsn
    scheme = next(m.version for m in MIGRATIONS if m.name == "embedding_passage_scheme")
    await migrate(dsn, target=max(m.version for m in MIGRATIONS if m.version < scheme))
    cortex = await make_cortex(dsn, migrated=False, embedder="default")
    target = await cortex.store("kb", f"{GARDEN} {FREEZE}")
    await cortex.embedded_behind()
    assert passages_of(dsn, target["id"]) > 10
    body = await recall(cortex, "when do we stop shipping releases?")
    assert body["results"][0]["id"] == target["id"]
    backfill = (await cortex.call("GET", "/v1/capabilities")).body["recall"]["backfill"]
    assert backfill["last_error"] is None, backfill
