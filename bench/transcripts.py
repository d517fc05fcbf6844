"""Transcripts: compression ratio and store/replay throughput on realistic dialogue text.

``python -m bench transcripts`` (one area of ``make bench``) writes
``docs/benchmarks/transcripts.json`` and refreshes docs/PERFORMANCE.md. The corpus is
:mod:`bench.dialogues` (seeded multi-turn support/engineering conversations with tool output,
2-28 KB each). Measured:

* zstd in process, per level (1, 3, 6, 9, 19): total ratio, per-dialogue ratio spread, and
  compress/inflate MB/s of one core (best of three), which is why level 3 is the default;
* over HTTP against ``cortexctl serve`` on PostgreSQL 17 + AGE (the production database):
  sequential ``POST /v1/transcripts`` (latency percentiles, transcripts/s, raw MB/s), then
  ``GET /v1/memories/{id}/replay`` of memories citing three spans each, spans only and
  ``full=true`` interleaved so both see the same load (the machine is shared).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
import zstandard
from hack.support.served import serve

from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, write_result
from bench.dialogues import DialogueGenerator

DIALOGUES = 300
REPLAYS = 600
LEVELS = (1, 3, 6, 9, 19)
HEADERS = {"X-Agent-Id": "dev:bench"}


def level_table(corpus: list[bytes]) -> dict[str, Any]:
    """Ratio and one-core speed of each zstd level over the corpus."""
    raw = sum(len(d) for d in corpus)
    table: dict[str, Any] = {}
    for level in LEVELS:
        compressor = zstandard.ZstdCompressor(level=level, write_content_size=True)
        frames = [compressor.compress(d) for d in corpus]
        packing, inflating = [], []
        for _ in range(3):
            started = time.perf_counter()
            for d in corpus:
                compressor.compress(d)
            packing.append(time.perf_counter() - started)
            started = time.perf_counter()
            for f in frames:
                zstandard.ZstdDecompressor().decompress(f)
            inflating.append(time.perf_counter() - started)
        ratios = sorted(len(d) / len(f) for d, f in zip(corpus, frames, strict=True))
        table[str(level)] = {
            "ratio": round(raw / sum(len(f) for f in frames), 3),
            "ratio_per_dialogue_p5_p50_p95": [round(ratios[int(q * (len(ratios) - 1))], 2)
                                              for q in (0.05, 0.5, 0.95)],
            "compress_mb_per_s": round(raw / min(packing) / 1e6, 1),
            "inflate_mb_per_s": round(raw / min(inflating) / 1e6, 1)}
    return table


async def store_all(base: str, corpus: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Store every dialogue in turn; their rows and the timing."""
    samples, stored = [], []
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        started = time.perf_counter()
        for i, text in enumerate(corpus):
            body = {"namespace": f"support/team-{i % 5}", "content": text,
                    "metadata": {"channel": "chat", "turns": text.count("\nuser: ") + 1}}
            t0 = time.perf_counter()
            async with session.post(f"{base}/v1/transcripts", json=body) as r:
                answer = await r.json()
                assert r.status == 201, answer
            samples.append((time.perf_counter() - t0) * 1000)
            stored.append(answer)
        elapsed = time.perf_counter() - started
    raw = sum(s["raw_bytes"] for s in stored)
    return stored, {"latency_ms": percentiles(samples), "count": len(stored),
                    "per_second": round(len(stored) / elapsed, 1),
                    "raw_mb_per_s": round(raw / elapsed / 1e6, 2),
                    "ratio_at_rest": round(raw / sum(s["stored_bytes"] for s in stored), 3)}


async def cite_and_replay(base: str, stored: list[dict[str, Any]]) -> dict[str, Any]:
    """One memory per transcript citing three spans; then replays, spans and full
    alternating (which goes first alternates too)."""
    memories = []
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for i, t in enumerate(stored):
            n = t["raw_chars"]
            spans = [{"transcript_id": t["id"], "start": k * n // 3, "end": k * n // 3 + 200}
                     for k in range(3)]
            body = {"namespace": f"support/team-{i % 5}", "content": f"finding {i}",
                    "citations": spans}
            async with session.post(f"{base}/v1/memories", json=body) as r:
                assert r.status == 201, await r.text()
                memories.append((await r.json())["id"])
        samples: dict[str, list[float]] = {"spans": [], "full": []}
        out_bytes = {"spans": 0, "full": 0}
        for i in range(REPLAYS):
            memory = memories[i % len(memories)]
            for kind in ("spans", "full") if i % 2 else ("full", "spans"):
                t0 = time.perf_counter()
                url = f"{base}/v1/memories/{memory}/replay" + ("?full=true" if kind == "full"
                                                               else "")
                async with session.get(url) as r:
                    data = await r.read()
                    assert r.status == 200, data
                samples[kind].append((time.perf_counter() - t0) * 1000)
                out_bytes[kind] += len(data)
    return {kind: {"latency_ms": percentiles(ms),
                   "per_second_sequential": round(1000 / statistics.fmean(ms), 1),
                   "mean_response_bytes": out_bytes[kind] // len(ms)}
            for kind, ms in samples.items()}


def run() -> dict[str, Any]:
    """Run the transcript benchmark and write docs/benchmarks/transcripts.json."""
    corpus = DialogueGenerator(seed=16).corpus(DIALOGUES)
    encoded = [d.encode() for d in corpus]
    out: dict[str, Any] = {
        "load_average_before": os.getloadavg(),
        "corpus": {"dialogues": len(corpus), "raw_bytes": sum(len(d) for d in encoded),
                   "mean_bytes": sum(len(d) for d in encoded) // len(encoded),
                   "generator": "bench/dialogues.py seed 16"},
        "zstd_levels": level_table(encoded),
    }
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        dsn = create_database(server, "bench_transcripts")
        asyncio.run(migrate(dsn))
        config = Path(tmp) / "transcripts.yaml"
        config.write_text(yaml.safe_dump({"quotas": {"enabled": False},
                                          "transcripts": {"enabled": True}}))
        with serve(dsn, Path(tmp), "--config", str(config)) as served:
            stored, out["store_http"] = asyncio.run(store_all(served.base, corpus))
            out["replay_http"] = asyncio.run(cite_and_replay(served.base, stored))
    out["load_average_after"] = os.getloadavg()
    write_result("transcripts", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
