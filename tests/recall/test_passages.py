"""Long memories by meaning, in full (docs/adr/0096): a memory longer than the model's window
is embedded in passages and found by its best one, and the write-behind embedder keeps a
tight deadline on long memories. PostgreSQL 17 + pgvector, the server over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from hack.support.waiting import await_until

from attested_cortex.embedding import default, minilm
from attested_cortex.store.embeddings import vector_literal
from attested_cortex.store.migrating import migrate
from attested_cortex.store.schema import MIGRATIONS
from tests.recall.test_hybrid import metric, recall
from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database

#: About 1,500 word pieces on gardening: far past MiniLM's window of 128.
GARDEN = " ".join(
    f"In bed {i} the tomatoes want staking, the basil wants pinching and the compost heap "
    "wants turning before the autumn rains arrive." for i in range(60))
FREEZE = "Deploys freeze on Fridays after 3pm."
OTHERS = ("The cafeteria serves lunch at noon",
          "Rotate the database password every ninety days",
          "Kubernetes operators reconcile the desired state")


#: A session's worth of words, repeated to the length a test needs.
SESSION = "the user asked about the release train and the assistant answered at length "


async def store_sessions(cortex: CortexClient, count: int, *, repeat: int) -> None:
    """``count`` memories of ``repeat`` times :data:`SESSION` in one batch request."""
    reply = await cortex.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "sessions", "content": f"session {i}: {SESSION * repeat}"}
        for i in range(count)]})
    assert reply.status in (200, 201), reply.text


def passages_of(dsn: str, memory_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memory_embeddings WHERE memory_id = %s",
                           (memory_id,)).fetchone()
    assert row is not None
    return int(row[0])


async def long_memory_recalled_first(cortex: CortexClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """Stores the long gardening memory among :data:`OTHERS`, waits for their vectors and
    recalls it by a question sharing no word with it: (the memory, its explained result),
    having checked it came first."""
    target = await cortex.store("kb", f"{GARDEN} {FREEZE}")
    for text in OTHERS:
        await cortex.store("kb", text)
    await cortex.embedded_behind()
    body = await recall(cortex, "when do we stop shipping releases?", explain=True)
    first = body["results"][0]
    assert first["id"] == target["id"], body["results"]
    return target, first


async def test_a_long_memory_is_found_by_a_passage_past_the_window(
        age_database: Database, make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn, embedder="minilm")
    # no word in common with the memory: only its meaning, at its very end, can find it
    target, first = await long_memory_recalled_first(cortex)
    assert first["explain"]["vector"]["similarity"] > 0.12  # its own window: 0.01
    assert passages_of(age_database.dsn, target["id"]) > 10
    # a shorter revision leaves no passage of the longer one behind
    reply = await cortex.call("PATCH", f"/v1/memories/{target['id']}",
                              {"content": FREEZE})
    assert reply.status == 200, reply.text
    await cortex.embedded_behind()
    assert passages_of(age_database.dsn, target["id"]) == 1
    again = await recall(cortex, "when do we stop shipping releases?")
    assert again["results"][0]["id"] == target["id"]


async def test_the_static_model_finds_a_long_memory_by_its_best_passage(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # docs/adr/0136: the static model's vector of the whole memory is the mean of 60
    # gardening sentences (similarity 0.08, below the cafeteria's 0.084); its last window
    # holds the freeze (0.125)
    cortex = await make_cortex(age_database.dsn, embedder="default")
    target, first = await long_memory_recalled_first(cortex)
    assert first["explain"]["fulltext"] is None  # no word in common: its meaning only
    assert first["explain"]["vector"]["similarity"] > 0.11
    # the whole text's mean first (the vector it had before), then each window
    assert passages_of(age_database.dsn, target["id"]) > 10
    short = await cortex.store("kb", FREEZE)
    await cortex.embedded_behind()
    assert passages_of(age_database.dsn, short["id"]) == 1


async def test_long_memories_are_embedded_behind_within_a_tight_deadline(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # 60 memories of 14 KB in one batch: one call of the static model took 0.7 s idle and
    # 2.6 s loaded, past the deadline, and every vector waited for the backfill
    cortex = await make_cortex(age_database.dsn, embedder="default",
                               embedding={"timeout_ms": 300})
    await store_sessions(cortex, 60, repeat=180)
    await cortex.embedded_behind()
    reply = await cortex.call("GET", "/v1/capabilities")
    behind = reply.body["recall"]["write_behind"]
    assert behind["failed"] == 0 and behind["embedded"] == 60, behind
    assert reply.body["recall"]["embedder"]["model"] == default.MODEL


async def test_the_backfill_leaves_the_write_behind_its_memories(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # 40 memories at once into a queue of 8: 32 go to the backfill, 8 wait for the
    # write-behind; each is embedded once (the backfill embedded the queued ones again)
    cortex = await make_cortex(age_database.dsn, embedder="minilm",
                               embedding={"write_queue": 8})
    await store_sessions(cortex, 40, repeat=6)

    async def all_embedded() -> dict[str, Any] | None:
        recall_part = (await cortex.call("GET", "/v1/capabilities")).body["recall"]
        backfill, behind = recall_part["backfill"], recall_part["write_behind"]
        done = (backfill["state"] == "idle" and backfill["pending"] == 0
                and behind["queued"] == 0)
        return recall_part if done else None

    recall_part = await await_until(all_embedded, what="every memory embedded", seconds=120)
    behind = recall_part["write_behind"]
    assert behind["overflowed"] == 32
    assert behind["embedded"] + recall_part["backfill"]["embedded"] == 40, recall_part
    # the backlog is visible while it lasts, and gone once drained
    assert behind["lagging"] is False and behind["lag_s"] == 0
    metrics = (await cortex.call("GET", "/metrics")).text
    assert metric(metrics, "cortex_embedding_write_behind_queued") == 0
    assert metric(metrics, "cortex_embedding_write_behind_lag_seconds") == 0


async def test_an_existing_cortex_keeps_its_vectors_across_the_migration(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # vectors written before passages existed (one row a memory) stay current: no re-embedding
    before = max(m.version for m in MIGRATIONS if m.version < next(
        m.version for m in MIGRATIONS if m.name == "embedding_passages"))
    await migrate(age_database.dsn, target=before)
    # The memory and its vector as the server before this change wrote them: by SQL, since
    # this build's writes need the columns of later migrations (written_allowed, 0040).
    target = {"id": str(uuid.uuid4())}
    (vector,) = minilm.MiniLMEmbedder().embed_now([FREEZE])
    with psycopg.connect(age_database.dsn) as conn:
        conn.execute("INSERT INTO memories (id, namespace, content, author) "
                     "VALUES (%s, 'kb', %s, 'dev:tester')", (target["id"], FREEZE))
        conn.execute("INSERT INTO memory_embeddings (memory_id, model, dim, revision, embedding) "
                     "VALUES (%s, %s, %s, 1, %s::vector)",
                     (target["id"], minilm.MODEL, minilm.DIMENSION, vector_literal(vector)))
    await migrate(age_database.dsn)
    cortex = await make_cortex(age_database.dsn, migrated=False, embedder="minilm")

    async def settled() -> dict[str, Any] | None:
        recall_part = (await cortex.call("GET", "/v1/capabilities")).body["recall"]
        return recall_part if recall_part["backfill"]["state"] == "idle" else None

    caps = await await_until(settled, what="the backfill's first pass", seconds=60)
    assert caps["backfill"]["pending"] == 0 and caps["backfill"]["embedded"] == 0, caps
    body = await recall(cortex, "when do we stop shipping releases?")
    assert body["results"][0]["id"] == target["id"] and body["results"][0]["embedded"]
    with psycopg.connect(age_database.dsn) as conn:
        assert conn.execute("SELECT passage FROM memory_embeddings").fetchall() == [(0,)]
