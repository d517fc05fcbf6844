"""Encryption at rest (ADR 0056): what sealing transcripts costs, on and off in one run.

``python -m bench encryption`` writes ``docs/benchmarks/encryption.json`` and refreshes
docs/PERFORMANCE.md. Two ``cortexctl serve`` processes on PostgreSQL 17 + AGE, one with
``encryption.at_rest`` on and one off (both with the same master key file), each with its
own database; requests alternate between them one by one (which goes first alternates too),
so both see the same machine load. Measured:

* sequential ``POST /v1/transcripts`` of the dialogue corpus (bench/dialogues.py): rate and
  latency percentiles, on vs off, and the bytes at rest;
* ``GET /v1/memories/{id}/replay?full=true`` of memories citing them: latency, on vs off;
* rotation: a third server whose key ring gains v2 re-seals the "on" database's frames
  (frames/s until capabilities list v2 only, the server's start included);
* in process, one core: sealing and opening the corpus's zstd frames (MB/s), and keying
  the lexemes of the recall quality set's memories into blind tokens (memories/s);
* memories (bench/encryption_memories.py): recall p95 at 10k and 100k and sequential store
  throughput, sealed vs plain, alternating; the rate at which the worker seals existing
  memories; and, in the rotation, the rate at which it moves them to v2.

Two narrower runs print their figures and write nothing: ``--batches N`` (the batch stores
alone, N batches each way) and ``--insert-many N`` (the batch path in process, N rounds).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import yaml
import zstandard
from hack.support.served import serve
from psycopg.rows import dict_row

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.blinding import key_tsvector
from attested_cortex.attest.memory_sealing import MemorySeal
from attested_cortex.attest.sealing import Sealer
from attested_cortex.store.memories import NewMemory, insert_many
from attested_cortex.store.memory_ciphers import bind_cipher
from attested_cortex.store.migrating import migrate
from bench import encryption_memories
from bench.common import age_server, create_database, percentiles, write_result
from bench.dialogues import DialogueGenerator
from bench.qualityset import build
from bench.textgen import TextGenerator

DIALOGUES = 300
REPLAYS = 400
HEADERS = {"X-Agent-Id": "dev:bench"}
MODES = ("off", "on")


async def store_alternating(bases: dict[str, str], corpus: list[str],
                            ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every dialogue stored on both servers, alternating which goes first."""
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    stored: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for i, text in enumerate(corpus):
            body = {"namespace": f"support/team-{i % 5}", "content": text}
            for mode in MODES if i % 2 else MODES[::-1]:
                t0 = time.perf_counter()
                async with session.post(f"{bases[mode]}/v1/transcripts", json=body) as r:
                    answer = await r.json()
                    assert r.status == 201, answer
                samples[mode].append((time.perf_counter() - t0) * 1000)
                stored[mode].append(answer)
    return stored, {mode: {"latency_ms": percentiles(samples[mode]),
                           "per_second_sequential": round(
                               1000 * len(samples[mode]) / sum(samples[mode]), 1),
                           "stored_bytes": sum(s["stored_bytes"] for s in stored[mode])}
                    for mode in MODES}


async def replay_alternating(bases: dict[str, str],
                             stored: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One memory per transcript citing a span, then full replays alternating."""
    memories: dict[str, list[str]] = {m: [] for m in MODES}
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for mode in MODES:
            for i, t in enumerate(stored[mode]):
                body = {"namespace": f"support/team-{i % 5}", "content": f"finding {i}",
                        "citations": [{"transcript_id": t["id"], "start": 0, "end": 100}]}
                async with session.post(f"{bases[mode]}/v1/memories", json=body) as r:
                    assert r.status == 201, await r.text()
                    memories[mode].append((await r.json())["id"])
        for i in range(REPLAYS):
            for mode in MODES if i % 2 else MODES[::-1]:
                memory = memories[mode][i % len(memories[mode])]
                t0 = time.perf_counter()
                async with session.get(f"{bases[mode]}/v1/memories/{memory}/replay"
                                       "?full=true") as r:
                    data = await r.json()
                    assert r.status == 200 and data["transcripts"][0]["readable"], data
                samples[mode].append((time.perf_counter() - t0) * 1000)
    return {mode: {"latency_ms": percentiles(samples[mode])} for mode in MODES}


def sealing_speed(corpus: list[bytes], key: bytes) -> dict[str, Any]:
    """Seal and open every zstd frame of the corpus, best of three, one core."""
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True)
    frames = [compressor.compress(d) for d in corpus]
    ids = [uuid.uuid4() for _ in frames]
    sealer = Sealer(mk.KeyRing.single(key))
    sealing, opening = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        sealed = [sealer.seal("transcripts", i, f) for i, f in zip(ids, frames, strict=True)]
        sealing.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i, (version, s) in zip(ids, sealed, strict=True):
            sealer.open("transcripts", i, version, s)
        opening.append(time.perf_counter() - t0)
    size = sum(len(f) for f in frames)
    return {"frames": len(frames), "frame_bytes": size,
            "seal_mb_per_s": round(size / min(sealing) / 1e6, 1),
            "open_mb_per_s": round(size / min(opening) / 1e6, 1),
            "seal_us_per_frame": round(min(sealing) / len(frames) * 1e6, 2)}


def blinding_speed(dsn: str, key: bytes) -> dict[str, Any]:
    """Key the weighted tsvectors of the quality set's memories (PostgreSQL computes them
    once, outside the timing), best of three, one core."""
    memories, _ = build(memories=2000, lexical=1, paraphrase=1)
    with psycopg.connect(dsn) as conn:
        vectors = [row[0] for row in conn.execute(
            "SELECT (setweight(to_tsvector('english', t), 'B'))::text "
            "FROM unnest(%s::text[]) AS t", ([m.content for m in memories],)).fetchall()]
    subkey = mk.derive_subkey(key, "memory")
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        for v in vectors:
            key_tsvector(v, subkey)
        runs.append(time.perf_counter() - t0)
    lexemes = sum(v.count("'") // 2 for v in vectors)
    return {"memories": len(vectors), "lexemes": lexemes,
            "memories_per_s": round(len(vectors) / min(runs)),
            "us_per_memory": round(min(runs) / len(vectors) * 1e6, 2)}


def run() -> dict[str, Any]:
    """Run the encryption benchmark and write docs/benchmarks/encryption.json."""
    corpus = DialogueGenerator(seed=16).corpus(DIALOGUES)
    key = mk.generate_key()
    out: dict[str, Any] = {"load_average_before": os.getloadavg(),
                           "corpus": {"dialogues": len(corpus),
                                      "generator": "bench/dialogues.py seed 16"},
                           "sealing_in_process": sealing_speed([d.encode() for d in corpus], key)}
    with _keyed_work(key) as (server, work, key_file):
        with _pair(server, work, key_file) as (off, on):
            bases = {"off": off.base, "on": on.base}
            stored, out["store_http"] = asyncio.run(store_alternating(bases, corpus))
            out["replay_http"] = asyncio.run(replay_alternating(bases, stored))
            out["blinding_in_process"] = blinding_speed(off.dsn, key)
            out["memories"] = encryption_memories.run(bases, {"off": off.dsn, "on": on.dsn})
        # after both servers stop: the re-sealing is timed on a server of its own
        out["reseal"] = reseal_rate(work, on.dsn, key)
    off_rate = out["store_http"]["off"]["per_second_sequential"]
    on_rate = out["store_http"]["on"]["per_second_sequential"]
    out["store_cost_percent"] = round(100 * (off_rate - on_rate) / off_rate, 1)
    out["load_average_after"] = os.getloadavg()
    write_result("encryption", out)
    return out


def batches_only(batches: int) -> dict[str, Any]:
    """``python -m bench.encryption --batches N``: only the batch stores of the memories
    half (N batches of 1,000 each way, alternating), for a tighter figure of their cost
    than the ten of a 10k run; printed, not written to docs/benchmarks."""
    key = mk.generate_key()
    with _keyed_work(key) as (server, work, key_file), \
            _pair(server, work, key_file) as (off, on):
        before = os.getloadavg()
        batches = asyncio.run(encryption_memories.load_alternating(
            {"off": off.base, "on": on.base}, batches * encryption_memories.BATCH,
            seed=batches))
    return {"load_average_before": before, "batch_store_http": batches,
            "load_average_after": os.getloadavg()}


def insert_many_paired(rounds: int) -> dict[str, Any]:
    """``python -m bench.encryption --insert-many N``: ``store.memories.insert_many`` of
    1,000 bench memories in process, plain and sealed alternating (which goes first
    alternates), each in a transaction rolled back (the table does not grow), N rounds
    after 3 of warm-up: the batch path without HTTP, its medians and the quartiles of each
    round's sealed time over its plain twin's. Printed, not written to docs/benchmarks."""
    return asyncio.run(_insert_many_paired(rounds))


async def _insert_many_paired(rounds: int) -> dict[str, Any]:
    with age_server() as server:
        dsn = create_database(server, "bench_encryption_insert_many")
        await migrate(dsn)
        conns = {mode: await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, row_factory=dict_row) for mode in MODES}
        bind_cipher(conns["on"], MemorySeal(Sealer(mk.KeyRing.single(mk.generate_key()))))
        gen, took = TextGenerator(seed=rounds), {m: [] for m in MODES}
        before = os.getloadavg()
        for n in range(3 + rounds):
            bodies: list[dict[str, Any]] = list(gen.memories(1000))
            for mode in MODES if n % 2 else MODES[::-1]:
                batch = [NewMemory(uuid.uuid4(), b["namespace"], b["title"], b["content"],
                                   b["tags"], {}) for b in bodies]
                conn = conns[mode]
                await conn.execute("BEGIN")
                t0 = time.perf_counter()
                await insert_many(conn, batch, author="dev:bench")
                if n >= 3:
                    took[mode].append((time.perf_counter() - t0) * 1000)
                await conn.execute("ROLLBACK")
        for conn in conns.values():
            await conn.close()
    ratios = [on / off for off, on in zip(took["off"], took["on"], strict=True)]
    return {"rounds": rounds, "load_average_before": before,
            **{m: {"median_ms_per_1000": round(statistics.median(took[m]), 1)} for m in MODES},
            "paired_time_ratio_quartiles": [round(q, 3) for q in statistics.quantiles(
                ratios, n=4)], "load_average_after": os.getloadavg()}


def reseal_rate(work: Path, dsn: str, key: bytes) -> dict[str, Any]:
    """Rotation: a server whose ring gains v2 as current re-seals every frame of the "on"
    database; frames per second until capabilities list v2 only (default batch and
    pause)."""
    ring = work / "ring"
    ring.mkdir()
    for name, text in mk.ring_files({1: key, 2: mk.generate_key()}, 2).items():
        (ring / name).write_text(text)
    config = work / "rotate.yaml"
    config.write_text(yaml.safe_dump({"quotas": {"enabled": False},
                                      "transcripts": {"enabled": True},
                                      "encryption": {"at_rest": True},
                                      "master_key": {"dir": str(ring)}}))
    (work / "rotate").mkdir()
    started = time.perf_counter()  # the worker starts with the server: count its start too
    memories: dict[str, Any] = {}
    with serve(dsn, work / "rotate", "--config", str(config), "--embedder", "none") as served:
        while True:
            request = urllib.request.Request(f"{served.base}/v1/capabilities",
                                             headers=HEADERS)
            with urllib.request.urlopen(request, timeout=10) as response:
                state = json.load(response)["encryption"]
            frames = state["transcript_frames_by_key_version"]
            held = state["memories_by_key_version"]
            elapsed = time.perf_counter() - started
            if set(frames) <= {"v2"} and not memories:
                memories["frames_done_s"] = round(elapsed, 2)
            if set(frames) <= {"v2"} and set(held) <= {"v2"}:
                break
            if elapsed > 600:
                raise TimeoutError(f"re-sealing still at {frames}")
            time.sleep(0.05)  # polling interval of a bounded wait
    moved = {"frames": frames.get("v2", 0), "memories": held.get("v2", 0)}
    return {**moved, "seconds": round(elapsed, 2),
            "rows_per_s": round((moved["frames"] + moved["memories"]) / elapsed, 1),
            "frames_per_s": round(moved["frames"] / max(memories["frames_done_s"], 0.01), 1),
            "memories_per_s": round(moved["memories"] / elapsed, 1),
            "batch": state["resealer"]["batch"],
            "note": "elapsed includes the server's start (a floor of the rate); each pass "
                    "moves a batch of frames and one of memories, so frames_per_s is over "
                    "the time until the frames were done, memories_per_s over the whole"}


@dataclass(frozen=True)
class _Served:
    base: str
    dsn: str


@contextmanager
def _keyed_work(key: bytes) -> Iterator[tuple[Any, Path, Path]]:
    """A PostgreSQL server, a working directory and the master key's file in it."""
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        key_file = work / "master.key"
        key_file.write_bytes(key)
        yield server, work, key_file


@contextmanager
def _pair(server: Any, work: Path, key_file: Path) -> Iterator[tuple[_Served, _Served]]:
    """Two servers on ``server``, one key file: encryption off and on."""
    with _served(server, work, key_file, "off") as off, \
            _served(server, work, key_file, "on") as on:
        yield off, on


@contextmanager
def _served(server: Any, work: Path, key_file: Path, mode: str) -> Iterator[_Served]:
    """A ``cortexctl serve`` on its own database, encryption ``mode``."""
    dsn = create_database(server, f"bench_encryption_{mode}")
    asyncio.run(migrate(dsn))
    config = work / f"{mode}.yaml"
    config.write_text(yaml.safe_dump({"quotas": {"enabled": False},
                                      "transcripts": {"enabled": True},
                                      "encryption": {"at_rest": mode == "on"}}))
    (work / mode).mkdir()
    with serve(dsn, work / mode, "--config", str(config), "--embedder", "none",
               "--master-key-file", str(key_file)) as served:
        yield _Served(served.base, dsn)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--batches":
        print(json.dumps(batches_only(int(sys.argv[2])), indent=2))
    elif len(sys.argv) == 3 and sys.argv[1] == "--insert-many":
        print(json.dumps(insert_many_paired(int(sys.argv[2])), indent=2))
    else:
        print(json.dumps(run(), indent=2))
