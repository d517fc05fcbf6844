"""Recall quality at small scale: a regression guard of bench/quality.py's figures.

The same labelled set (bench/qualityset.py) at 400 memories: hybrid recall must beat
full-text by at least 10 points R@5 on paraphrase queries (which share no content word with
their target) and lose nothing on lexical ones (a target's three rarest words).
"""

from __future__ import annotations

from bench.qualityset import build

from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database


async def ranks(cortex: CortexClient, queries: list[tuple[str, str]]) -> list[int | None]:
    out: list[int | None] = []
    for text, target in queries:
        reply = await cortex.call("POST", "/v1/recall", {"query": text, "limit": 10})
        assert reply.status == 200, reply.text
        got = [r["id"] for r in reply.body["results"]]
        out.append(got.index(target) + 1 if target in got else None)
    return out


def r_at(found: list[int | None], k: int) -> float:
    return sum(1 for r in found if r is not None and r <= k) / len(found)


async def test_hybrid_beats_fulltext_on_paraphrases_and_keeps_lexical(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    memories, queries = build(memories=400, lexical=40, paraphrase=60, seed=7)
    hybrid = await make_cortex(age_database.dsn)
    ids = {m.key: (await hybrid.store("quality", m.content))["id"] for m in memories}
    await hybrid.embedded_behind()
    fulltext = await make_cortex(age_database.dsn, migrated=False, embedder="none")
    by_kind = {kind: [(q.text, ids[q.target]) for q in queries if q.kind == kind]
               for kind in ("lexical", "paraphrase")}
    scores = {}
    for kind, asked in by_kind.items():
        scores[kind] = {name: r_at(await ranks(server, asked), 5)
                        for name, server in (("hybrid", hybrid), ("fulltext", fulltext))}
    assert scores["paraphrase"]["hybrid"] >= scores["paraphrase"]["fulltext"] + 0.10, scores
    assert scores["lexical"]["hybrid"] >= scores["lexical"]["fulltext"], scores
    assert scores["lexical"]["hybrid"] >= 0.9, scores
