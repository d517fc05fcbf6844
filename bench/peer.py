"""Recall beside the peer (issue 25, "Latency beside the peer"): ai-memory and this server on
the same corpus, the same client and the same queries, one after the other per query.

The peer is not built or fetched here: ``python -m bench.peer`` measures it when an
``ai-memory`` binary is given (``BENCH_PEER_AI_MEMORY=/path/to/ai-memory``, or on PATH);
without one it records why it was skipped. The peer serves its embedded SQLite store at its
``keyword`` tier (FTS5; its semantic tier loads its model from a model hub at run time, which
this machine cannot reach), unsigned HTTP writes allowed for the load
(``AI_MEMORY_REQUIRE_AGENT_ATTESTATION=0``).

Two query sets, as in bench/recall.py: a target memory's three rarest words (R@5 checked on
both sides: a target is found when a hit's content equals the stored content) and the Zipf
common-word queries of ``TextGenerator.query``. Each query goes to both servers, the order
alternating, so the machine's load falls on both alike. Ours is measured full-text
(``--embedder none``) and hybrid (the embedded default, after its backfill).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from hack.support.served import free_port, serve, stop, wait_until_up

from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, unthrottled_config, write_result
from bench.recall import copy_memories, load_average, rarest_word_queries, wait_backfill
from bench.textgen import TextGenerator

SIZE = int(os.environ.get("BENCH_PEER_SIZE", "100000"))
#: The short-memory shape's corpus (issue 39); ``BENCH_PEER_SHORT_SIZE`` to change it.
SHORT_SIZE = int(os.environ.get("BENCH_PEER_SHORT_SIZE", str(SIZE)))
COMMON_QUERIES = 600
RARE_TARGETS = 300
WARMUP = 30
PEER_BULK = 1000
#: Text per bulk request to the peer (its body limit refused LongMemEval's 14 MB chunks).
PEER_BULK_BYTES = 1_000_000
#: Our hybrid side's embedder (``BENCH_PEER_EMBEDDER``): the static model, not the default
#: MiniLM, whose backfill of 100,000 memories takes hours of this machine's time (13 windows
#: a second a core); ``none`` measures full text alone beside the peer.
EMBEDDER = os.environ.get("BENCH_PEER_EMBEDDER", "static")
#: Which corpora (``BENCH_PEER_SHAPES``, comma-separated): ``generated``, ``short``.
SHAPES = os.environ.get("BENCH_PEER_SHAPES", "generated,short").split(",")
#: One agent writes and reads on both sides (the peer keeps an unscoped memory private to
#: the agent that wrote it).
AGENT = "bench"


#: The peer's version ``make peers`` (hack/peers/ensure-ai-memory.sh) builds.
PEER_VERSION = "ai-memory-0.10.0"


def cached_peer() -> Path | None:
    """The binary ``make peers`` built, when its stamp names :data:`PEER_VERSION`."""
    root = Path(os.environ.get("ATTESTED_CORTEX_CACHE",
                               Path.home() / ".cache" / "attested-cortex")) / "peers" / PEER_VERSION
    stamp, binary = root / ".version", root / "bin" / "ai-memory"
    built = stamp.is_file() and stamp.read_text().strip() == PEER_VERSION
    return binary if built and binary.is_file() else None


def peer_binary() -> str | None:
    """The ai-memory binary to measure: ``BENCH_PEER_AI_MEMORY`` when set, else the one
    ``make peers`` built, else one on PATH."""
    given = os.environ.get("BENCH_PEER_AI_MEMORY")
    if not given:
        cached = cached_peer()
        given = str(cached) if cached is not None else shutil.which("ai-memory")
    return given if given and Path(given).is_file() else None


def corpus(count: int) -> list[dict[str, Any]]:
    """The shared corpus: bench/recall.py's generator and seed."""
    return list(TextGenerator(seed=11).memories(count))


def short_corpus(count: int, *, seed: int = 13) -> list[dict[str, Any]]:
    """Issue 39's synthetic shape: each memory 22 words in one namespace, 18 drawn (Zipf)
    from the 500 commonest words of the generator's vocabulary and 4 from the rest of it
    uniformly (rare: each in about 20 memories at 100k), shuffled; an opaque title (the peer refuses
    an empty one), no tags.
    A target's three rarest words then match it and almost nothing else, so a recall is
    likely all fixed cost: the shape where the peer measured 9.6 ms p95 against our 24.0,
    while the generator's own memories (1-6 sentences of Zipf words in 43 namespaces,
    titles and tags) have rarest words common enough that the peer ranks many matches
    (26.1 ms)."""
    gen = TextGenerator(seed=seed)
    rng = random.Random(seed)
    common, rare = gen.words[:500], gen.words[500:]
    weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(common))]
    out = []
    for i in range(count):
        words = rng.choices(common, weights=weights, k=18) + rng.choices(rare, k=4)
        rng.shuffle(words)
        # the peer refuses an empty title ("validation failed"): an opaque one no query
        # word matches, on both sides
        out.append({"namespace": "synthetic", "title": f"xshortx{i}",
                    "content": " ".join(words), "tags": []})
    return out


@contextmanager
def serve_peer(binary: str, workdir: Path) -> Iterator[str]:
    """``ai-memory serve`` on a free loopback port, its own SQLite file."""
    port = free_port()
    log = workdir / "peer.log"
    # its per-(agent, namespace) daily write quota (1,000) and storage cap lifted, as the
    # bench lifts ours (bench.common.unthrottled_config)
    env = {**os.environ, "AI_MEMORY_REQUIRE_AGENT_ATTESTATION": "0", "HOME": str(workdir),
           "AI_MEMORY_MAX_MEMORIES_PER_DAY": str(10 ** 9),
           "AI_MEMORY_MAX_STORAGE_BYTES": str(10 ** 12),
           # its defaults that would skew a keyword measurement: no secret screening of
           # writes, no folding of access counts into ranking between queries
           "AI_MEMORY_SECRET_SCREEN_MODE": "off", "AI_MEMORY_ACCESS_FOLD_INTERVAL_SECS": "0"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [binary, "--db", str(workdir / "peer.db"), "serve", "--host", "127.0.0.1",
             "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_up(f"{base}/api/v1/health", process, seconds=120)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}; its log ends:\n{log.read_text()[-2000:]}") from exc
        yield base
    finally:
        stop(process)


def bulk_chunks(bodies: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``bodies`` in chunks of at most :data:`PEER_BULK` memories and :data:`PEER_BULK_BYTES`
    of text: the peer refuses a larger body (413; LongMemEval's 1,000 sessions are 14 MB)."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for body in bodies:
        length = len(body["content"]) + len(body["title"])
        if chunk and (len(chunk) == PEER_BULK or size + length > PEER_BULK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(body)
        size += length
    if chunk:
        yield chunk


async def load_peer(base: str, bodies: list[dict[str, Any]]) -> float:
    """The corpus through the peer's bulk route; seconds taken."""
    started = time.perf_counter()
    created = 0
    async with aiohttp.ClientSession() as session:
        for part in bulk_chunks(bodies):
            chunk = [{"namespace": b["namespace"], "title": b["title"], "content": b["content"],
                      "tags": b["tags"], "tier": "long", "agent_id": AGENT,
                      "on_conflict": "version"}
                     for b in part]
            async with session.post(f"{base}/api/v1/memories/bulk", json=chunk,
                                    headers={"X-Agent-Id": AGENT}) as response:
                if response.status >= 300:
                    raise RuntimeError(f"peer bulk load: {response.status} "
                                       f"{(await response.text())[:500]}")
                answer = await response.json()
                if answer.get("errors"):
                    raise RuntimeError(f"peer bulk load: {str(answer)[:500]}")
                created += int(answer["created"])
    if created != len(bodies):
        raise RuntimeError(f"the peer kept {created} of {len(bodies)} memories")
    return time.perf_counter() - started


def peer_hits(body: Any) -> list[dict[str, Any]]:
    """The memories of a peer recall answer (a list under ``memories``)."""
    hits: list[dict[str, Any]] = body["memories"]
    return hits


async def one_query(session: aiohttp.ClientSession, side: str, base: str,
                    text: str) -> tuple[float, list[str]]:
    """One recall (limit 10): its latency in ms and the hits' contents."""
    started = time.perf_counter()
    if side == "peer":
        async with session.get(f"{base}/api/v1/recall", params={"context": text, "limit": "10"},
                               headers={"X-Agent-Id": AGENT}) as response:
            body = await response.json()
            assert response.status == 200, body
        contents = [str(h.get("content", "")) for h in peer_hits(body)]
    else:
        async with session.post(f"{base}/v1/recall",
                                json={"query": text, "limit": 10},
                                headers={"X-Agent-Id": AGENT}) as response:
            body = await response.json()
            assert response.status == 200, body
        contents = [str(h.get("content", "")) for h in body["results"]]
    return (time.perf_counter() - started) * 1000, contents


async def side_by_side(bases: dict[str, str], queries: list[tuple[str, str | None]]
                       ) -> dict[str, Any]:
    """Every query to every side, the order rotating; latency and (when a target is given)
    the rank at which its content came back."""
    samples: dict[str, list[float]] = {s: [] for s in bases}
    ranks: dict[str, list[int | None]] = {s: [] for s in bases}
    sides = list(bases)
    async with aiohttp.ClientSession() as session:
        for i, (text, target) in enumerate(queries):
            order = sides[i % len(sides):] + sides[:i % len(sides)]
            for side in order:
                ms, contents = await one_query(session, side, bases[side], text)
                if i >= WARMUP:
                    samples[side].append(ms)
                if target is not None:
                    ranks[side].append(contents.index(target) + 1 if target in contents
                                       else None)
    out: dict[str, Any] = {}
    for side in sides:
        row: dict[str, Any] = {"latency_ms": percentiles(samples[side])}
        if ranks[side]:
            n = len(ranks[side])
            row.update({f"r@{k}": round(sum(1 for r in ranks[side] if r and r <= k) / n, 3)
                        for k in (1, 5, 10)})
        out[side] = row
    out["load_average"] = load_average()
    return out


def measure(binary: str, server: Any, work: Path, bodies: list[dict[str, Any]], *,
            common_words: bool) -> dict[str, Any]:
    """One corpus on both sides (its own database and peer store): rare-word queries (a
    target's three rarest words) and, with ``common_words``, the Zipf common-word ones."""
    work.mkdir(parents=True)
    out: dict[str, Any] = {}
    by_content = {b["content"] for b in bodies}
    dsn = create_database(server, f"bench_peer_{work.name}")
    asyncio.run(migrate(dsn))
    copy_memories(dsn, bodies, seed=len(bodies))
    rare = rarest_word_queries(dsn, RARE_TARGETS, seed=len(bodies))
    with psycopg.connect(dsn) as conn:
        content_of = {str(r[0]): r[1] for r in conn.execute(
            "SELECT id, content FROM memories").fetchall()}
    rare_queries: list[tuple[str, str | None]] = [
        (text, content_of[target]) for text, target in rare
        if content_of.get(target) in by_content]
    gen = TextGenerator(seed=5)
    common: list[tuple[str, str | None]] = [(gen.query(), None)
                                            for _ in range(WARMUP + COMMON_QUERIES)]
    config = str(unthrottled_config(work))
    out["ours_hybrid_embedder"] = EMBEDDER
    with serve_peer(binary, work) as peer, ExitStack() as stack:
        out["peer_load_seconds"] = round(asyncio.run(load_peer(peer, bodies)), 1)
        bases = {"peer": peer}
        if EMBEDDER != "none":
            with serve(dsn, work, "--config", config, "--embedder", EMBEDDER) as backfilling:
                out["ours_backfill"] = asyncio.run(wait_backfill(backfilling.base))
            bases["ours_hybrid"] = stack.enter_context(
                serve(dsn, work, "--config", config, "--embedder", EMBEDDER)).base
        bases["ours_fulltext"] = stack.enter_context(
            serve(dsn, work, "--config", config, "--embedder", "none")).base
        out["rare_word"] = asyncio.run(side_by_side(bases, rare_queries))
        if common_words:
            out["common_word"] = asyncio.run(side_by_side(bases, common))
    return out


def run() -> dict[str, Any]:
    """Measure and write docs/benchmarks/peer.json."""
    binary = peer_binary()
    out: dict[str, Any] = {"memories": SIZE, "peer": "ai-memory 0.10.0, keyword tier (FTS5)",
                           "command": "BENCH_PEER_AI_MEMORY=<binary> python -m bench.peer"}
    if binary is None:
        # the figures of a run that had the binary stay in docs/benchmarks/peer.json
        out["skipped"] = ("no ai-memory binary: `make peers` builds it, or set "
                          "BENCH_PEER_AI_MEMORY (see docs/adr/0042)")
        return out
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    out["peer_version"] = version
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        if "generated" in SHAPES:
            out.update(measure(binary, server, Path(tmp) / "generated", corpus(SIZE),
                               common_words=True))
        if "short" not in SHAPES:
            write_result("peer", out)
            return out
        out["short_shape"] = {
            "memories": SHORT_SIZE, "shape": "22 words: 18 common (Zipf over 500) + 4 rare, "
            "one namespace; queries: a target's three rarest words",
            **measure(binary, server, Path(tmp) / "short", short_corpus(SHORT_SIZE),
                      common_words=False)}
    write_result("peer", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
