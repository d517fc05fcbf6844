"""Hybrid fusion on literal ranked lists (docs/adr/0074, 0094), on real PostgreSQL + pgvector: the
full-text list is given as ids, scores and ranks, the vector list comes from 3-dimensional
vectors whose cosine similarity to the query is chosen, and ``store.recall.fuse`` ranks them.

A partial full-text match (score below ``MATCH_FLOOR``) no longer lifts a lower vector
candidate over a better one; a match holding the query's words still outranks the nearest
vectors; weak matches the vector half does not hold still answer, after it, in full-text
order.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from attested_cortex.store import embeddings, memories
from attested_cortex.store import recall as store_recall
from attested_cortex.store.migrating import migrate
from tests.support.postgres import Database

MODEL = "literal-3d"


def alike(similarity: float) -> tuple[float, float, float]:
    """A unit vector whose cosine similarity to (1, 0, 0) is ``similarity``."""
    return (similarity, math.sqrt(1 - similarity ** 2), 0.0)


async def fused(dsn: str, vectors: dict[str, float], fulltext: list[tuple[str, float]],
                ) -> list[tuple[str, Any]]:
    """Store one memory per name (a vector for those in ``vectors``), fuse the literal
    full-text list (best first, ranks 1..n) with the vector half; names and score parts in
    answer order."""
    names = sorted({*vectors, *(n for n, _ in fulltext)})
    async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, row_factory=dict_row) as conn:
        ids: dict[str, uuid.UUID] = {}
        updated: dict[str, Any] = {}
        for name in names:
            async with conn.transaction():
                m = await memories.insert(conn, namespace="kb", title="", content=name,
                                          tags=(), metadata={}, author="test")
            ids[name], updated[name] = m.id, m.updated_at
            if name in vectors:
                await embeddings.put(conn, memory_id=m.id, revision=m.revision, model=MODEL,
                                     vector=alike(vectors[name]))
        found = store_recall.FulltextCandidates(
            store_recall.Candidates(json.dumps([
                {"id": str(ids[n]), "fts": score, "cov": score, "r": rank,
                 "updated_at": updated[n].isoformat(), "ns_depth": 1}
                for rank, (n, score) in enumerate(fulltext, start=1)])),
            params={"query": "q", "limit": 10, "pool": 200, "qdepth": 0},
            scope=store_recall.scope_of(None))
        hits = await store_recall.fuse(conn, found, store_recall.QueryVector(MODEL, (1, 0, 0)))
    by_id = {v: k for k, v in ids.items()}
    return [(by_id[h.memory.id], h.parts) for h in hits]


async def test_partial_match_does_not_lift_a_lower_vector_over_the_target(
        age_database: Database) -> None:
    await migrate(age_database.dsn)
    # The paraphrase's target is second in the vector list and holds none of the query's
    # words; "partial" is third and holds one of them (score 0.17, first in full text).
    # Before the floor: partial 0.78/63 + 0.17/61 = 0.0152 > target 0.80/62 = 0.0129.
    answer = await fused(age_database.dsn,
                         {"nearest": 0.95, "target": 0.80, "partial": 0.78, "far": 0.3},
                         [("partial", 0.17)])
    assert [n for n, _ in answer] == ["nearest", "target", "partial", "far"]
    parts = dict(answer)["partial"]
    # explain still shows the full-text score and rank it was not counted with
    assert parts.fulltext_rank == 1 and parts.fulltext_score is not None
    # the vector term alone: its similarity scaled between the list's worst and best
    # (docs/adr/0094)
    weight = 1 - store_recall.FULLTEXT_WEIGHT
    assert math.isclose(parts.relevance, weight * (0.78 - 0.3) / (0.95 - 0.3), rel_tol=1e-4)
    assert store_recall.MATCH_FLOOR > 0.17


async def test_a_match_of_every_word_outranks_the_nearest_vectors(
        age_database: Database) -> None:
    await migrate(age_database.dsn)
    # "exact" holds the query's words (0.92, as the lexical targets of bench/quality.py)
    # with a middling vector: 0.92/61 + 0.5/64 = 0.0229 > nearest 0.95/61 = 0.0156.
    answer = await fused(age_database.dsn,
                         {"nearest": 0.95, "second": 0.9, "third": 0.85, "exact": 0.5},
                         [("exact", 0.92), ("second", 0.1)])
    assert [n for n, _ in answer][:2] == ["exact", "nearest"]


async def test_weak_matches_without_a_vector_follow_in_fulltext_order(
        age_database: Database) -> None:
    await migrate(age_database.dsn)
    # Two weak full-text matches the vector half does not hold: relevance 0 for both, so
    # they follow the vector candidates, the better match first although it is older.
    answer = await fused(age_database.dsn, {"near": 0.9},
                         [("weaker-older", 0.2), ("weakest-newer", 0.05)])
    assert [n for n, _ in answer] == ["near", "weaker-older", "weakest-newer"]
    assert [p.relevance for _, p in answer[1:]] == [0.0, 0.0]
