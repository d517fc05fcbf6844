"""Recall quality on the labelled set (bench/qualityset.py) and the held-out set
(bench/heldout.py): R@1/R@5/R@10 and MRR for full-text only, vector only and hybrid, split
by lexical and paraphrase queries, for each embedded model (``default``: wordllama, ``minilm``:
MiniLM) in the same run (docs/adr/0042).

Goal (issue 15): hybrid beats full-text by >= 10 points R@5 on paraphrase queries and loses
nothing on lexical ones. ``hooks`` (docs/adr/0071): the same hybrid server with the reference
reranker (``post_recall``), the query expansion (``pre_recall``) and both, each asked query by
query alternately with the server without hooks (paired: R@5/MRR and the recall latency of
both under the same load). The memories are stored through a real ``cortexctl serve`` (so the
default embedder embeds them on write), then given update times spread over a year (recency
then varies as in real use). Full-text and hybrid are asked over HTTP of two servers on the
same database (``--embedder none`` and the default); vector only is the vector candidate
list itself: the stored vectors ordered by cosine distance to the query's, in SQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import yaml
from hack.support.served import Served, serve
from hack.support.waiting import wait_until

from attested_cortex.embedding.choosing import build_embedder
from attested_cortex.store.embeddings import vector_literal
from attested_cortex.store.migrating import migrate
from bench import heldout
from bench.common import (
    age_server,
    create_database,
    embedded_behind,
    percentiles,
    unthrottled_config,
    write_result,
)
from bench.qualityset import Memory, Query, build

LIMIT = 10


def scores(ranks: Sequence[int | None]) -> dict[str, float]:
    """R@1, R@5, R@10 and MRR of 1-based target ranks (None: not in the top ``LIMIT``)."""
    n = len(ranks) or 1

    def at(k: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= k) / n, 3)

    return {"n": len(ranks), "r@1": at(1), "r@5": at(5), "r@10": at(10),
            "mrr": round(sum(1 / r for r in ranks if r is not None) / n, 3)}


async def store_all(base: str, memories: Sequence[Memory]) -> dict[int, str]:
    """Store every memory over HTTP; returns key -> id."""
    ids: dict[int, str] = {}
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        for m in memories:
            async with session.post(f"{base}/v1/memories",
                                    json={"namespace": "quality", "content": m.content}) as r:
                body = await r.json()
                assert r.status == 201, body
                ids[m.key] = body["id"]
    return ids


def spread_times(dsn: str, seed: int) -> None:
    """Give memories update times over the past year (recency varies, as in real use)."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM memories").fetchall()]
        with conn.cursor() as cur:
            cur.executemany("UPDATE memories SET updated_at = %s, created_at = %s WHERE id = %s",
                            [(at, at, i) for i in ids
                             for at in [now - timedelta(seconds=rng.randint(0, 365 * 86400))]])
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")
        conn.execute("VACUUM ANALYZE memory_embeddings")


def shares_a_word(dsn: str, queries: Sequence[Query], ids: dict[int, str]) -> set[int]:
    """Indexes of paraphrase queries that share a lexeme with their target (to drop)."""
    bad: set[int] = set()
    with psycopg.connect(dsn) as conn:
        for i, q in enumerate(queries):
            if q.kind != "paraphrase":
                continue
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM unnest(tsvector_to_array(to_tsvector('english', "
                "%s))) l WHERE l = ANY(tsvector_to_array(m.search))) FROM memories m "
                "WHERE m.id = %s", (q.text, ids[q.target])).fetchone()
            if row and row[0]:
                bad.add(i)
    return bad


async def http_ranks(base: str, queries: Sequence[Query], ids: dict[int, str]
                     ) -> tuple[list[int | None], list[float]]:
    ranks: list[int | None] = []
    latency: list[float] = []
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        for q in queries:
            started = time.perf_counter()
            async with session.post(f"{base}/v1/recall",
                                    json={"query": q.text, "limit": LIMIT}) as r:
                body = await r.json()
                assert r.status == 200, body
            latency.append((time.perf_counter() - started) * 1000)
            got = [h["id"] for h in body["results"]]
            target = ids[q.target]
            ranks.append(got.index(target) + 1 if target in got else None)
    return ranks, latency


def vector_ranks(dsn: str, queries: Sequence[Query], ids: dict[int, str],
                 embedder_name: str) -> list[int | None]:
    embedder: Any = build_embedder(embedder_name)
    dim = int(embedder.info.dimension)
    ranks: list[int | None] = []
    with psycopg.connect(dsn) as conn:
        for q in queries:
            (vec,) = embedder.embed_now([q.text])
            rows = conn.execute(  # a memory's best passage (docs/adr/0096)
                f"SELECT memory_id::text FROM memory_embeddings WHERE dim = {dim} "
                f"GROUP BY memory_id "
                f"ORDER BY min(embedding::vector({dim}) <=> %s::vector({dim})) LIMIT %s",
                (vector_literal(vec), LIMIT)).fetchall()
            got = [r[0] for r in rows]
            target = ids[q.target]
            ranks.append(got.index(target) + 1 if target in got else None)
    return ranks


def by_kind(queries: Sequence[Query], ranks: Sequence[int | None]) -> dict[str, Any]:
    """Scores per query kind, the held-out set's under ``heldout``."""
    out: dict[str, Any] = {"heldout": {}}
    for part, held in ((out, False), (out["heldout"], True)):
        for kind in ("lexical", "paraphrase"):
            part[kind] = scores([ranks[i] for i, q in enumerate(queries)
                                 if q.kind == kind and (q.target >= heldout.KEY_BASE) == held])
    return out


#: The reference hooks measured, by variant (docs/adr/0071).
RERANK = {"name": "rerank", "events": ["post_recall"], "mode": "daemon", "timeout_ms": 1000,
          "command": ["python", "-m", "attested_cortex.hooks.reference.rerank"]}
EXPAND = {"name": "expand", "events": ["pre_recall", "post_store", "post_update"],
          "mode": "daemon", "timeout_ms": 1000,
          "command": ["python", "-m", "attested_cortex.hooks.reference.expand"]}
HOOK_VARIANTS = {"rerank": [RERANK], "expand": [EXPAND], "expand+rerank": [EXPAND, RERANK]}


def hooks_file(tmp: Path, variant: str, cortex_url: str) -> Path:
    """The hooks file of ``variant``; the expansion reads its vocabulary from ``cortex_url``."""
    import sys

    hooks = [{**h, "command": [sys.executable, *h["command"][1:]],
              "env": {**h.get("env", {}), "CORTEX_URL": cortex_url,
                      "CORTEX_AGENT_ID": "bench-expand"}}
             for h in HOOK_VARIANTS[variant]]
    path = tmp / f"hooks-{variant.replace('+', '-')}.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": hooks}))
    return path


async def paired_ranks(bases: Sequence[str], queries: Sequence[Query], ids: dict[int, str]
                       ) -> tuple[list[list[int | None]], list[list[float]]]:
    """Each query asked of every server in turn (so load hits them alike): ranks and
    latencies per server, after a warm-up of ten queries each (not counted)."""
    ranks: list[list[int | None]] = [[] for _ in bases]
    latency: list[list[float]] = [[] for _ in bases]
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as session:
        for n, q in enumerate([*queries[:10], *queries]):
            for i, base in enumerate(bases):
                started = time.perf_counter()
                async with session.post(f"{base}/v1/recall",
                                        json={"query": q.text, "limit": LIMIT}) as r:
                    body = await r.json()
                    assert r.status == 200, body
                if n < 10:
                    continue
                latency[i].append((time.perf_counter() - started) * 1000)
                got = [h["id"] for h in body["results"]]
                target = ids[q.target]
                ranks[i].append(got.index(target) + 1 if target in got else None)
    return ranks, latency


def expansion_ready(served: Served) -> None:
    """Wait (bounded) until the expansion hook has read the cortex's vocabulary."""
    wait_until(lambda: "expand: " in served.log.read_text(errors="replace"),
               what="the expansion hook to read the vocabulary", seconds=600, interval_s=0.5)


def with_hooks(dsn: str, tmp: Path, extra: Sequence[str], queries: Sequence[Query],
               ids: dict[int, str]) -> dict[str, Any]:
    """Each hook variant against the same server without hooks, query by query."""
    out: dict[str, Any] = {}
    with serve(dsn, tmp, *extra, "--embedder", "none") as reader, serve(dsn, tmp, *extra) as off:
        for variant in HOOK_VARIANTS:
            path = hooks_file(tmp, variant, reader.base)
            with serve(dsn, tmp, *extra, "--hooks-file", str(path)) as on:
                if variant.startswith("expand"):
                    expansion_ready(on)
                load = [round(x, 2) for x in os.getloadavg()]
                (r_off, r_on), (l_off, l_on) = asyncio.run(
                    paired_ranks([off.base, on.base], queries, ids))
            out[variant] = {"off": by_kind(queries, r_off), "on": by_kind(queries, r_on),
                            "recall_ms_off": percentiles(l_off),
                            "recall_ms_on": percentiles(l_on), "load_average_before": load}
    return out


def evaluate(dsn: str, fulltext_base: str, hybrid_base: str, queries: Sequence[Query],
             ids: dict[int, str], embedder_name: str) -> dict[str, Any]:
    """Scores of the three modes per query kind, the held-out set's apart (``heldout``)."""
    ft, _ = asyncio.run(http_ranks(fulltext_base, queries, ids))
    hy, latency = asyncio.run(http_ranks(hybrid_base, queries, ids))
    ve = vector_ranks(dsn, queries, ids, embedder_name)
    out: dict[str, Any] = {"heldout": {}}
    for part, held in ((out, False), (out["heldout"], True)):
        for kind in ("lexical", "paraphrase"):
            pick = [i for i, q in enumerate(queries)
                    if q.kind == kind and (q.target >= heldout.KEY_BASE) == held]
            part[kind] = {"fulltext": scores([ft[i] for i in pick]),
                          "vector": scores([ve[i] for i in pick]),
                          "hybrid": scores([hy[i] for i in pick])}
            part[kind]["hybrid_minus_fulltext_r@5"] = round(
                part[kind]["hybrid"]["r@5"] - part[kind]["fulltext"]["r@5"], 3)
    latency.sort()
    out["hybrid_recall_ms"] = {"p50": round(latency[len(latency) // 2], 2),
                               "p95": round(latency[int(len(latency) * 0.95)], 2)}
    return out


def measure(server: Any, tmp: Path, *, memories: int, lexical: int, paraphrase: int,
            name: str = "bench_quality", embedder: str = "default",
            hooks: bool = True) -> dict[str, Any]:
    """Build the sets, load them, and score the three modes with ``embedder``."""
    mems, queries = build(memories=memories, lexical=lexical, paraphrase=paraphrase)
    held_mems, held_queries = heldout.build()
    mems, queries = mems + held_mems, queries + held_queries
    dsn = create_database(server, f"{name}_{embedder}")
    asyncio.run(migrate(dsn))
    # The rate quota (on by default) would answer the load and query bursts with 429s.
    config = str(unthrottled_config(tmp))
    chosen = ("--embedder", embedder)
    with serve(dsn, tmp, "--config", config, *chosen) as hybrid:
        ids = asyncio.run(store_all(hybrid.base, mems))
        embedded_behind(hybrid.base)  # the write-behind embedder has stored every vector
    spread_times(dsn, seed=memories)
    dropped = shares_a_word(dsn, queries, ids)
    kept = [q for i, q in enumerate(queries) if i not in dropped]
    with serve(dsn, tmp, "--config", config, "--embedder", "none") as fulltext, \
            serve(dsn, tmp, "--config", config, *chosen) as hybrid:
        result = evaluate(dsn, fulltext.base, hybrid.base, kept, ids, embedder)
    if hooks:
        result["hooks"] = with_hooks(dsn, tmp, ("--config", config, *chosen), kept, ids)
    return {"embedder": embedder, "memories": len(mems), "queries": len(kept),
            "paraphrase_dropped_for_sharing_a_word": len(dropped), **result}


def run() -> dict[str, Any]:
    """Run the quality benchmark and write docs/benchmarks/quality.json: the default model's
    scores at the top level, MiniLM's under ``minilm`` (same sets, same run)."""
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        out = measure(server, Path(tmp), memories=2000, lexical=150, paraphrase=200)
        out["minilm"] = measure(server, Path(tmp), memories=2000, lexical=150, paraphrase=200,
                                embedder="minilm")
    out["goals"] = {"paraphrase_r@5_gain_points": 10, "lexical_r@5_loss_points": 0,
                    "paraphrase_hybrid_r@5": 0.5, "heldout_paraphrase_hybrid_r@5": 0.8}
    out["set"] = ("bench/qualityset.py: seeded synthetic memories (subject, action, object, "
                  "time, reason) with word-disjoint synonym forms; lexical queries are a "
                  "target's three rarest words, paraphrase queries name its subject, action "
                  "and object in other forms and share no lexeme with it; heldout: "
                  "bench/heldout.py, hand-written memories and questions stored among them")
    write_result("quality", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
