"""Recall's halves at once (docs/adr/0080) on a real PostgreSQL: the second connection is
never waited for, an answer made without one is the same answer, a memory deleted between
the statements is not returned, and a lexeme tested alone matches exactly the words a
memory holds.
"""

from __future__ import annotations

import asyncio
import math
import uuid

import psycopg
from psycopg.rows import dict_row

from attested_cortex.store import embeddings, memories
from attested_cortex.store import recall as store_recall
from attested_cortex.store.database import Database
from attested_cortex.store.migrating import migrate
from tests.support.postgres import Database as PgDatabase

BOUND_S = 5.0  # an upper bound on a wait, never a pacing sleep
MODEL = "literal-3d"


async def test_a_spare_connection_is_never_waited_for(pg15_dsn: str) -> None:
    db = await Database.open(pg15_dsn, min_size=2, max_size=2)
    try:
        async with db.connection() as first:
            async with db.spare_connection() as spare:  # the other idle one
                assert spare is not None and spare is not first
                assert (await (await spare.execute("SELECT 1 AS one")).fetchone()) == {"one": 1}
                async with asyncio.timeout(BOUND_S):  # both slots taken: None, at once
                    async with db.spare_connection() as none:
                        assert none is None
            async with db.connection() as second:  # the spare one came back
                assert second is not first
    finally:
        await db.close()
    db = await Database.open(pg15_dsn, min_size=1, max_size=2)
    try:
        async with db.connection():
            async with asyncio.timeout(BOUND_S):  # a free slot, but nothing idle: no connect
                async with db.spare_connection() as none:
                    assert none is None
    finally:
        await db.close()


def _alike(similarity: float) -> tuple[float, float, float]:
    """A unit vector whose cosine similarity to (1, 0, 0) is ``similarity``."""
    return (similarity, math.sqrt(1 - similarity ** 2), 0.0)


async def _stored(conn: psycopg.AsyncConnection[dict[str, object]],
                  texts: dict[str, float | None]) -> dict[str, uuid.UUID]:
    """One memory per text in namespace kb, with a vector where a similarity is given."""
    ids: dict[str, uuid.UUID] = {}
    for text, similarity in texts.items():
        async with conn.transaction():
            m = await memories.insert(conn, namespace="kb", title="", content=text,
                                      tags=(), metadata={}, author="test")
        ids[text] = m.id
        if similarity is not None:
            await embeddings.put(conn, memory_id=m.id, revision=m.revision, model=MODEL,
                                 vector=_alike(similarity))
    return ids


TEXTS: dict[str, float | None] = {
    "the ledger of the medic": 0.95, "ledger entries erased": 0.9,
    "a medic on call": 0.4, "nothing alike": 0.1, "ledger without a vector": None,
    "the medic erases the ledger at night": 0.7,
}


def _ranked(hits: list[store_recall.Hit]) -> list[tuple[object, ...]]:
    """Each hit and how its score was made, but its recency (each statement's own now())."""
    return [(h.memory.id, p.fulltext_score, p.fulltext_rank, p.vector_similarity,
             p.vector_rank, p.relevance, p.proximity)
            for h in hits if (p := h.parts) is not None]


async def test_an_answer_without_a_spare_connection_is_the_same(
        age_database: PgDatabase) -> None:
    await migrate(age_database.dsn)
    vector = store_recall.QueryVector(MODEL, (1.0, 0.0, 0.0))
    async with await psycopg.AsyncConnection.connect(
            age_database.dsn, autocommit=True, row_factory=dict_row) as conn, \
            await psycopg.AsyncConnection.connect(
                age_database.dsn, autocommit=True, row_factory=dict_row) as other:
        ids = await _stored(conn, TEXTS)
        for namespace in (None, "kb", "kb/deeper"):
            scope = store_recall.scope_of(namespace)
            found = await store_recall.fulltext_candidates(
                conn, query="medic ledger", scope=scope, limit=10)
            near = await store_recall.vector_candidates(other, scope, vector)
            beside = await store_recall.fuse(conn, found, vector, near)
            alone = await store_recall.fuse(conn, found, vector)  # reads them itself
            assert _ranked(beside) == _ranked(alone)
            assert beside[0].memory.id == ids["the ledger of the medic"]
            assert {h.memory.id for h in beside} == set(ids.values())
            # the lists carried what the final score needs: a memory of kb, one level above
            # the query's kb/deeper, is half as near
            proximity = 0.5 if namespace == "kb/deeper" else 1.0
            assert all(h.parts is not None and h.parts.proximity == proximity
                       and 0.99 < h.parts.recency <= 1.0 for h in beside)


async def test_a_memory_deleted_after_the_lists_were_made_is_not_returned(
        age_database: PgDatabase) -> None:
    await migrate(age_database.dsn)
    vector = store_recall.QueryVector(MODEL, (1.0, 0.0, 0.0))
    async with await psycopg.AsyncConnection.connect(
            age_database.dsn, autocommit=True, row_factory=dict_row) as conn:
        ids = await _stored(conn, TEXTS)
        scope = store_recall.scope_of(None)
        found = await store_recall.fulltext_candidates(conn, query="medic ledger", scope=scope,
                                                       limit=10)
        near = await store_recall.vector_candidates(conn, scope, vector)
        gone = ids["the ledger of the medic"]
        listed = {e["id"] for e in found.found.entries()} | {e["id"] for e in near.entries()}
        assert str(gone) in listed
        current = await memories.get(conn, gone)
        async with conn.transaction():
            await memories.tombstone(conn, current)
        hits = await store_recall.fuse(conn, found, vector, near)
        assert gone not in {h.memory.id for h in hits}
        assert len(hits) == len(TEXTS) - 1


#: Texts whose words the parser makes lexemes of with quotes, colons, stars, backslashes,
#: operators of the tsquery syntax and letters outside ASCII.
AWKWARD = [
    "O'Neil's back\\slash", "a:b*c d:* !x", "path\\to\\file C:\\dir", "'quoted' \"dq\"",
    "it''s 100% done ü ñ 東京", "foo|bar & !baz <-> (x)",
    "http://x.org/a?b=c'd e-mail user@host.com http://h.org/p\\q",
]


async def test_a_lexeme_alone_matches_exactly_the_words_a_memory_holds(pg15_dsn: str) -> None:
    query = store_recall._LEXEME_QUERY
    async with await psycopg.AsyncConnection.connect(pg15_dsn, autocommit=True) as conn:
        every = await (await conn.execute(
            "SELECT DISTINCT l AS lexeme FROM unnest(%s::text[]) t, "
            "unnest(tsvector_to_array(to_tsvector('english', t))) l", (AWKWARD,))).fetchall()
        lexemes = [r[0] for r in every]
        assert any("'" in lex for lex in lexemes)
        for text in AWKWARD:
            cur = await conn.execute(
                f"SELECT q.lexeme, to_tsvector('english', %(text)s) @@ {query} AS found, "
                "q.lexeme = ANY(tsvector_to_array(to_tsvector('english', %(text)s))) AS holds "
                "FROM unnest(%(lexemes)s::text[]) AS q(lexeme)",
                {"text": text, "lexemes": lexemes})
            for lexeme, found, holds in await cur.fetchall():
                assert found == holds, (text, lexeme)
        # the parser makes no lexeme with a backslash; keyed tokens hold none either, but a
        # lexeme is any text: each of these is found alone and matches no other
        odd = ["a\\b", "\\", "x'y", "''", "a:b", "*", "a & b", "!", "東京"]
        cur = await conn.execute(
            f"SELECT q.lexeme, o.other, array_to_tsvector(ARRAY[o.other]) @@ {query} "
            "FROM unnest(%(odd)s::text[]) AS q(lexeme), unnest(%(odd)s::text[]) AS o(other)",
            {"odd": odd})
        for lexeme, other, found in await cur.fetchall():
            assert found == (lexeme == other), (lexeme, other)
