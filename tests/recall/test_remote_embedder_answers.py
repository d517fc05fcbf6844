"""The remote embedder against a real endpoint on loopback (issue 20, item 10): an answer
larger than one network read is read whole (16+ vectors of 1024 dimensions were "not an
embeddings list" and the backfill stayed ``failing``), a memory the endpoint refuses (413)
is isolated and reported while the backfill embeds the rest (it was retried from the top
forever), and NaN, infinite or all-zero vectors are never stored."""

from __future__ import annotations

from typing import Any

import psycopg
from hack.support.waiting import await_until

from tests.recall.embedserver import embed_server
from tests.recall.test_hybrid import capabilities
from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database

GOOD = 60
BAD = {"refused-word": "413", "nan-word": "nan", "inf-word": "inf", "zero-word": "zero"}


def vector_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()
    assert row is not None
    return int(row[0])


async def store_all(cortex: CortexClient, contents: list[str]) -> list[str]:
    return [(await cortex.store("kb", content))["id"] for content in contents]


async def settled(cortex: CortexClient, dsn: str) -> dict[str, Any] | None:
    caps = await capabilities(cortex)
    backfill = caps["backfill"]
    done = backfill and backfill["state"] == "idle" and vector_count(dsn) == GOOD
    return caps if done and backfill["refused"]["count"] == len(BAD) else None


async def test_large_answers_and_refused_memories_leave_the_rest_embedded(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    poison = {word: kind for word, kind in BAD.items() if kind != "413"}
    # stored first without an embedder, so the backfill meets them in windows of 64
    plain = await make_cortex(age_database.dsn, embedder="none")
    good = await store_all(plain, [f"note {i} about shipping" for i in range(GOOD)])
    bad = await store_all(plain, [f"a note with {word}" for word in BAD])
    async with embed_server(dimension=1024, refuse="refused-word", poison=poison) as endpoint:
        cortex = await make_cortex(age_database.dsn, migrated=False, embedder=endpoint.url)
        caps = await await_until(lambda: settled(cortex, age_database.dsn), seconds=60)
    assert max(endpoint.sizes) >= 16  # an answer of 16+ 1024-dim vectors, read whole
    backfill = caps["backfill"]
    assert sorted(backfill["refused"]["ids"]) == sorted(bad), backfill
    assert backfill["pending"] == len(BAD) and backfill["last_error"] is None
    assert caps["mode"] == "hybrid" and caps["embedder"]["dimension"] == 1024
    with psycopg.connect(age_database.dsn) as conn:
        stored = {str(r[0]) for r in conn.execute("SELECT memory_id FROM memory_embeddings")}
    assert stored == set(good)


async def test_an_answer_of_many_network_reads_is_read_whole(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    plain = await make_cortex(age_database.dsn, embedder="none")
    await store_all(plain, [f"note {i} about shipping" for i in range(GOOD)])
    async with embed_server(dimension=1024) as endpoint:
        cortex = await make_cortex(age_database.dsn, migrated=False, embedder=endpoint.url)

        async def embedded() -> bool:
            return vector_count(age_database.dsn) == GOOD

        await await_until(embedded, seconds=60)
    assert max(endpoint.sizes) >= 16
    backfill = (await capabilities(cortex))["backfill"]
    assert backfill["last_error"] is None and backfill["refused"]["count"] == 0


async def test_an_endpoint_refusing_every_text_is_an_outage_not_a_poisoned_window(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    """A wrong model name or key makes the endpoint refuse everything: the backfill backs
    off as for an outage and blames no memory."""
    plain = await make_cortex(age_database.dsn, embedder="none")
    await store_all(plain, [f"note {i}" for i in range(5)])
    async with embed_server(refuse="note") as endpoint:
        cortex = await make_cortex(age_database.dsn, migrated=False, embedder=endpoint.url,
                                   embedding={"dimension": 16, "model": "concepts-test"})

        async def failing() -> dict[str, Any] | None:
            backfill = (await capabilities(cortex))["backfill"]
            return backfill if backfill and backfill["state"] == "failing" else None

        backfill = await await_until(failing, seconds=30)
    assert "refused every text" in backfill["last_error"]
    assert backfill["refused"]["count"] == 0 and vector_count(age_database.dsn) == 0


async def test_a_write_behind_batch_fits_the_endpoints_batch_limit(
        age_database: Database, make_cortex: MakeCortex) -> None:
    # text-embeddings-inference refuses more than 32 texts a request by default: a batch of
    # 64 stored memories was refused whole and waited for the backfill
    async with embed_server(max_batch=32) as server:
        cortex = await make_cortex(age_database.dsn, embedder=server.url)
        reply = await cortex.call("POST", "/v1/memories:batch", {"memories": [
            {"namespace": "kb", "content": f"deploys freeze on friday {i}"} for i in range(64)]})
        assert reply.status in (200, 201), reply.text
        await cortex.embedded_behind()
        behind = (await capabilities(cortex))["write_behind"]
        assert behind["failed"] == 0 and behind["embedded"] == 64, behind
        assert max(server.sizes) <= 32
