"""Where hybrid recall loses its targets (issue 25): for every query of bench/quality.py, the
target's rank in the full-text candidate list, in the vector candidate list and in the fused
answer, read from one filled database per embedder (the same sets and loading as
bench/quality.py), and the fused rank under each term of the score taken away in turn.

Not part of ``make bench``: a diagnosis, run by hand (``python -m bench.fusion``), that prints
per kind how many targets the vector list holds in its top 5 and the fused answer does not,
and which candidates pushed them out (full-text only, both lists, or recency reordering
near-equals). The candidate lists are those of :mod:`attested_cortex.store.recall` itself
(``fulltext_candidates`` and the vector half of ``fuse``), so the diagnosis follows the code.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from hack.support.served import serve
from psycopg.rows import dict_row

from attested_cortex.embedding.choosing import build_embedder
from attested_cortex.store import recall as store_recall
from attested_cortex.store.embeddings import vector_literal
from attested_cortex.store.migrating import migrate
from bench import heldout
from bench.common import age_server, create_database, embedded_behind, unthrottled_config
from bench.quality import shares_a_word, spread_times, store_all
from bench.qualityset import Query, build

#: The vector list read per query: wider than the server's pool, to see a larger pool's gain.
WIDE = 200


async def lists(dsn: str, queries: Sequence[Query], ids: dict[int, str],
                embedder_name: str) -> list[dict[str, Any]]:
    """Per query: the full-text candidates (id, score, rank), the ``WIDE`` nearest vectors
    (id, distance) and every candidate's age in days."""
    embedder: Any = build_embedder(embedder_name)
    dim = int(embedder.info.dimension)
    model = embedder.info.model
    out: list[dict[str, Any]] = []
    async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, row_factory=dict_row) as conn:
        # HNSW returns at most ef_search rows (the server sets it to its pool the same way)
        await conn.execute(f"SET hnsw.ef_search = {WIDE}")
        for q in queries:
            found = (await store_recall.fulltext_candidates(
                conn, query=q.text, scope=store_recall.scope_of(None), limit=10)).found.entries()
            (vec,) = embedder.embed_now([q.text])
            cur = await conn.execute(
                f"SELECT e.memory_id::text AS id, (e.embedding::vector({dim}) <=> "
                f"%s::vector({dim}))::float8 AS dist FROM memory_embeddings e "
                f"JOIN memories m ON m.id = e.memory_id WHERE e.dim = {dim} "
                f"AND e.model = %s AND e.revision = m.revision AND m.deleted_at IS NULL "
                f"ORDER BY 2 LIMIT {WIDE}", (vector_literal(vec), model))
            vrows = await cur.fetchall()
            cand = {str(f["id"]) for f in found} | {r["id"] for r in vrows}
            cur = await conn.execute(
                "SELECT id::text AS id, extract(epoch FROM now() - updated_at)::float8 / 86400 "
                "AS age_days FROM memories WHERE id = ANY(%s::uuid[])", (sorted(cand),))
            ages = {r["id"]: r["age_days"] for r in await cur.fetchall()}
            out.append({
                "kind": q.kind, "heldout": q.target >= heldout.KEY_BASE, "text": q.text,
                "target": ids[q.target],
                "fts": [[str(f["id"]), f["fts"], f["r"], f["cov"]] for f in found],
                "vec": [[r["id"], r["dist"]] for r in vrows], "age_days": ages})
    return out


def collect(server: Any, tmp: Path, embedder: str) -> list[dict[str, Any]]:
    """Fill a database as bench/quality.py does, then read every query's lists."""
    mems, queries = build(memories=2000, lexical=150, paraphrase=200)
    held_mems, held_queries = heldout.build()
    mems, queries = mems + held_mems, queries + held_queries
    dsn = create_database(server, f"bench_fusion_{embedder}")
    asyncio.run(migrate(dsn))
    config = str(unthrottled_config(tmp))
    with serve(dsn, tmp, "--config", config, "--embedder", embedder) as hybrid:
        ids = asyncio.run(store_all(hybrid.base, mems))
        embedded_behind(hybrid.base)
    spread_times(dsn, seed=2000)
    dropped = shares_a_word(dsn, queries, ids)
    kept = [q for i, q in enumerate(queries) if i not in dropped]
    return asyncio.run(lists(dsn, kept, ids, embedder))


def ranked(q: dict[str, Any], *, pool: int = store_recall.DEFAULT_VECTOR_POOL,
           floor: float = store_recall.MATCH_FLOOR, recency: bool = True) -> list[str]:
    """The fused order of one query's lists, as store/recall.py fuses them (docs/adr/0094:
    each list scaled between its worst and best, ``FULLTEXT_WEIGHT`` of the full-text one;
    ``floor``: a full-text match holding less of the query's rarity weight counts nothing,
    0 is the rule before docs/adr/0074; recency orders equal scores only, docs/adr/0093)."""
    weight = store_recall.FULLTEXT_WEIGHT
    fts = {i: s for i, s, _, _ in q["fts"]}
    counted = {i: s for i, s, _, c in q["fts"] if c >= floor}
    sims = {i: 1 - d for i, d in q["vec"][:pool]}

    def scaled(scores: dict[str, float]) -> dict[str, float]:
        lo, hi = min(scores.values(), default=0.0), max(scores.values(), default=0.0)
        return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in scores.items()}

    f, v = scaled(counted), scaled(sims)
    scores = {i: weight * f.get(i, 0.0) + (1 - weight) * v.get(i, 0.0)
              for i in set(fts) | set(sims)}
    return sorted(scores, key=lambda i: (-scores[i], -fts.get(i, -1.0),
                                         q["age_days"][i] if recency else 0, i))


def rank_of(order: Sequence[str], target: str, limit: int = 10) -> int | None:
    top = list(order[:limit])
    return top.index(target) + 1 if target in top else None


def diagnose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: R@5 of the vector list and of the fused answer before and after the
    full-text floor (docs/adr/0074), now without recency and with a 200-vector pool; for
    targets in the vector top 5 but out of the fused top 5 before, what outranked them."""
    out: dict[str, Any] = {}
    groups = {"lexical": [], "paraphrase": [], "heldout_lexical": [],
              "heldout_paraphrase": []}  # type: dict[str, list[dict[str, Any]]]
    for q in rows:
        groups[("heldout_" if q["heldout"] else "") + q["kind"]].append(q)
    for name, qs in groups.items():
        n = len(qs) or 1

        def r5(ranks: list[int | None], n: int = n) -> float:
            return round(sum(1 for r in ranks if r is not None and r <= 5) / n, 3)

        vec = [rank_of([i for i, _ in q["vec"]], q["target"]) for q in qs]
        before = [rank_of(ranked(q, floor=0.0), q["target"]) for q in qs]
        after = [rank_of(ranked(q), q["target"]) for q in qs]
        pushers: Counter[str] = Counter()
        lost = 0
        for q, v, f in zip(qs, vec, before, strict=True):
            if v is None or v > 5 or (f is not None and f <= 5):
                continue
            lost += 1
            fts = {i: s for i, s, _, _ in q["fts"]}
            covs = {i: c for i, _, _, c in q["fts"]}
            above = {i for i, _ in q["vec"][:v]}
            pool = {i for i, _ in q["vec"][:store_recall.DEFAULT_VECTOR_POOL]}
            for i in ranked(q, floor=0.0)[:5]:
                if i in above:
                    continue
                pushers[("full text, not in the vector pool" if i not in pool else
                         "full text lifting a lower vector candidate" if i in fts else
                         "recency reordering vector candidates")
                        + (f" (share < {store_recall.MATCH_FLOOR:.3f})"
                           if covs.get(i, 1.0) < store_recall.MATCH_FLOOR else "")] += 1
        out[name] = {
            "n": len(qs), "vector_r@5": r5(vec), "fused_r@5_before": r5(before),
            "fused_r@5_now": r5(after),
            "fused_r@5_now_without_recency": r5(
                [rank_of(ranked(q, recency=False), q["target"]) for q in qs]),
            "fused_r@5_now_pool_200": r5(
                [rank_of(ranked(q, pool=WIDE), q["target"]) for q in qs]),
            "target_in_vector_pool_50": round(sum(
                1 for q in qs if q["target"] in {i for i, _ in q["vec"][:50]}) / n, 3),
            "target_in_vector_200": round(sum(
                1 for q in qs if q["target"] in {i for i, _ in q["vec"]}) / n, 3),
            "fts_list_empty": sum(1 for q in qs if not q["fts"]),
            "lost_from_vector_top5_before": lost, "outranked_by_before": dict(pushers)}
    return out


def model_alone(embedder_name: str) -> dict[str, float]:
    """The model by itself (exact cosine in numpy, no database): held-out paraphrase R@5 among
    the held-out memories only, and among them with the 2,000 synthetic memories as
    distractors (as bench/quality.py stores them). Every question, none dropped."""
    import numpy as np

    embedder: Any = build_embedder(embedder_name)
    held_mems, held_queries = heldout.build()
    synthetic, _ = build(memories=2000, lexical=150, paraphrase=200)
    questions = [q for q in held_queries if q.kind == "paraphrase"]

    def unit(texts: list[str]) -> Any:
        m = np.array(embedder.embed_now(texts), dtype=np.float64)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    held, others, asked = (unit([m.content for m in held_mems]),
                           unit([m.content for m in synthetic]), unit([q.text for q in questions]))
    out: dict[str, float] = {}
    for label, docs in (("heldout_only", held), ("with_synthetic", np.vstack([held, others]))):
        sims = asked @ docs.T
        hits = 0
        for n, q in enumerate(questions):
            t = q.target - heldout.KEY_BASE
            hits += int((sims[n] > sims[n, t]).sum()) < 5
        out[f"heldout_paraphrase_r@5_{label}"] = round(hits / len(questions), 3)
    return out


def main(argv: list[str]) -> int:
    embedders = argv or ["default", "minilm"]
    cache = Path(tempfile.gettempdir()) / "bench-fusion"
    cache.mkdir(exist_ok=True)
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        for embedder in embedders:
            path = cache / f"{embedder}.json"
            if not path.exists():
                path.write_text(json.dumps(collect(server, Path(tmp), embedder)))
    for embedder in embedders:
        rows = json.loads((cache / f"{embedder}.json").read_text())
        print(embedder, datetime.now(UTC).isoformat(timespec="seconds"))
        print(json.dumps({"model_alone": model_alone(embedder), **diagnose(rows)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
