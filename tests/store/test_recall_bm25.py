"""Full-text recall by BM25 over every memory a rare query word reaches (docs/adr/0093), on
real PostgreSQL: the best match is found however many newer memories share the query's
common words, and the score weighs rarity, repetition with saturation, length and the
title, with recency only ordering equal scores.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.rows import dict_row

from attested_cortex.store import memories
from attested_cortex.store import recall as store_recall
from attested_cortex.store.migrating import migrate

Rows = list[tuple[str, str, str, int]]  # (name, title, content, age in days)


async def ranked(dsn: str, rows: Rows, query: str, *more: str, pool: int = 200,
                 limit: int = 10) -> list[str]:
    """Store ``rows`` (each updated ``age`` days ago), ANALYZE, and recall ``query`` in full
    text: the names, best first (of each query, joined by "|", with ``more``)."""
    await migrate(dsn)
    async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, row_factory=dict_row) as conn:
        names = {}
        for name, title, content, age in rows:
            async with conn.transaction():
                m = await memories.insert(conn, namespace="kb", title=title, content=content,
                                          tags=(), metadata={}, author="test")
            at = datetime.now(UTC) - timedelta(days=age)
            await conn.execute("UPDATE memories SET updated_at = %s WHERE id = %s", (at, m.id))
            names[m.id] = name
        await conn.execute("ANALYZE memories")
        answers: list[str] = []
        for text in (query, *more):
            hits = await store_recall.recall(conn, query=text, namespace=None, limit=limit,
                                             pool=pool)
            answers += [*(["|"] if answers else []), *(names[h.memory.id] for h in hits)]
    return answers


async def test_an_old_best_match_is_found_past_the_newest_pool(pg15_dsn: str) -> None:
    # 40 newer memories hold the query's common words; the one holding its rare word is a
    # year old. No memory holds every query word, so the newest-first pool of 5 (the
    # relaxed OR) held only the newer ones and the answer missed it.
    rows: Rows = [(f"common{i}", "", f"weekly shipping update number {i}", i % 30)
                  for i in range(40)]
    rows.append(("target", "", "the zanzibar shipping manifest", 365))
    answer = await ranked(pg15_dsn, rows, "zanzibar weekly shipping invoice", pool=5, limit=3)
    assert answer[0] == "target", answer


async def test_bm25_weighs_rarity_saturation_length_and_title(pg15_dsn: str) -> None:
    filler = [(f"filler{i}", "", f"routine note {i} about the office kettle", 1)
              for i in range(30)]
    rows: Rows = [
        *filler,
        # repeating a common word does not outweigh holding the rare one
        ("repeats", "", "kettle kettle kettle kettle kettle kettle descaling", 1),
        ("rare", "", "the kettle needs a descaling with citric acid", 2),
        # the same words in a much longer memory weigh less
        ("long", "", "citric acid " + " ".join(f"word{i}" for i in range(60)), 2),
        # in the title they weigh more than in the content
        ("titled", "citric acid", "a note on cleaning", 3),
    ]
    answer = await ranked(pg15_dsn, rows, "citric acid kettle")
    assert answer.index("rare") < answer.index("repeats"), answer
    assert answer.index("titled") < answer.index("long"), answer
    assert answer.index("rare") < answer.index("long"), answer


async def test_recency_only_orders_equal_scores(pg15_dsn: str) -> None:
    rows: Rows = [
        ("old_strong", "", "pelican migration route over the delta", 300),
        ("new_weak", "", "pelican sightings", 0),
        ("twin_old", "", "heron nesting season", 200),
        ("twin_new", "", "heron nesting season", 1),
    ]
    answer = await ranked(pg15_dsn, rows, "pelican migration", "heron nesting")
    # the better match first however old; equal scores: the newer first
    assert answer == ["old_strong", "new_weak", "|", "twin_new", "twin_old"], answer


async def test_words_the_statistics_do_not_list_weigh_by_their_own_rarity(
        pg15_dsn: str) -> None:
    # ANALYZE lists the most common lexemes only (10 at statistics target 1; about 1,000 by
    # default, fewer than a large store's words). "osprey" is in 2 memories, "heron" in 8:
    # both unlisted, they weighed the same, and the newer heron memory came first. Counted
    # from the index, the rarer word outweighs the commoner one (docs/adr/0114).
    filler = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    rows: Rows = [(f"filler{i}", "", f"{filler} {i}", 5) for i in range(30)]
    rows += [(f"heron{i}", "", f"{filler} heron", 1) for i in range(7)]
    rows += [("osprey_only", "", f"{filler} osprey", 3), ("osprey2", "", "osprey", 4),
             ("heron_only", "", f"{filler} heron", 0)]
    async with await psycopg.AsyncConnection.connect(pg15_dsn, autocommit=True) as conn:
        await migrate(pg15_dsn)
        await conn.execute("ALTER TABLE memories ALTER COLUMN search SET STATISTICS 1")
    answer = await ranked(pg15_dsn, rows, "osprey heron", limit=3)
    assert set(answer[:2]) == {"osprey_only", "osprey2"}, answer


async def test_words_most_memories_hold_do_not_outweigh_a_telling_one(pg15_dsn: str) -> None:
    # Five query words are in 20 of 36 memories, "mango" in 6. Weighed ln(1 / frequency),
    # the five common words together (0.59 each) outscored the one telling word (1.79) and
    # the 20 office notes came before every mango memory. Weighed by the odds against a
    # memory holding it, ln((1 - f) / f), a word in half the memories or more tells them
    # apart by nothing (docs/adr/0137).
    rows: Rows = [(f"note{i}", "", f"please note the office kettle memo {i}", 1)
                  for i in range(20)]
    rows += [(f"garden{i}", "", f"garden rota {i} weekly", 1) for i in range(10)]
    rows += [(f"mango{i}", "", f"mango delivery {i} arrives", 2) for i in range(6)]
    answer = await ranked(pg15_dsn, rows, "please note the office kettle memo about mango",
                          limit=6)
    assert all(name.startswith("mango") for name in answer), answer
