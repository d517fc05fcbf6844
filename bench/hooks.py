"""Hook pipeline benchmark: daemon round trip, exec spawn cost, cost of a fire with no hooks.

Run with ``.venv/bin/python -m bench hooks`` (``make bench`` runs every area); writes
``docs/benchmarks/hooks.json``. Goals (seed 000, Decision 2): daemon round trip p50 <= 0.5 ms
and p99 <= 2 ms. The hook is examples/hooks/minimal_hook.py, so the figures are pipeline +
IPC + a trivial Python decision. Loopback only; bounded iteration counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from attested_cortex.hooks import HookPipeline, parse_settings

ROOT = Path(__file__).resolve().parent.parent
HOOK = [sys.executable, str(ROOT / "examples" / "hooks" / "minimal_hook.py")]
OUT = ROOT / "docs" / "benchmarks" / "hooks.json"
PAYLOAD = {"query": "backups", "results": [{"id": "m1", "namespace": "ops", "content": "x" * 200,
                                             "score": 0.9}], "truncated": False}
#: What a post_recall hook gets from a limit-10 recall: ten hits as the API shows them.
HIT = {"id": "0b0f6b7e-8b1c-4c61-9f7e-1d2a3b4c5d6e", "namespace": "team/ops",
       "title": "a title of some words", "content": "word " * 80, "tags": ["a", "b"],
       "metadata": {}, "author": "agent-7", "revision": 1,
       "created_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
       "deleted": False, "deleted_at": None, "score": 0.5, "embedded": True}
RECALL_PAYLOAD = {"query": "backups of the database", "namespace": None, "limit": 10,
                  "budget_tokens": None, "results": [HIT] * 10, "truncated": False}
#: Time between two recalls of the recall bench's sequential client (about its latency).
RECALL_GAP_S = 0.01


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)

    return {"n": len(ordered), "p50_ms": pick(0.50), "p95_ms": pick(0.95),
            "p99_ms": pick(0.99), "mean_ms": round(statistics.fmean(ordered), 4)}


async def timed(fire: Callable[[], Awaitable[Any]], *, runs: int, warmup: int,
                gap_s: float = 0.0, cpu: list[float] | None = None) -> list[float]:
    """``gap_s``: idle time before each fire (the hook's process goes to sleep meanwhile);
    ``cpu`` gets this thread's CPU time of each fire (ms), the server's own part of it."""
    for _ in range(warmup):
        await fire()
    samples = []
    for _ in range(runs):
        if gap_s:
            await asyncio.sleep(gap_s)
        started, cpu_started = time.perf_counter(), time.thread_time()
        await fire()
        samples.append((time.perf_counter() - started) * 1000)
        if cpu is not None:
            cpu.append((time.thread_time() - cpu_started) * 1000)
    return samples


async def measure(hooks: list[dict[str, Any]], event: str, *, runs: int,
                  payload: dict[str, Any] = PAYLOAD, gap_s: float = 0.0) -> dict[str, float]:
    settings = parse_settings({"version": 1, "hooks": hooks})
    pipeline = HookPipeline(settings, registry=CollectorRegistry())
    await pipeline.start()
    try:
        async def fire() -> Any:
            result = await pipeline.fire(event, payload, agent_id="bench", namespace="ops")
            assert all(r.failure is None for r in result.records), result.records
            return result

        cpu: list[float] = []
        wall = percentiles(await timed(fire, runs=runs, warmup=min(50, runs // 10),
                                       gap_s=gap_s, cpu=cpu))
        server = percentiles(cpu)
        return {**wall, "server_cpu_p50_ms": server["p50_ms"],
                "server_cpu_mean_ms": server["mean_ms"]}
    finally:
        await pipeline.aclose()


async def raw_pipe_floor(*, runs: int) -> dict[str, float]:
    """The same hook over bare asyncio pipes, no pipeline: the floor this machine allows."""
    proc = await asyncio.create_subprocess_exec(
        *HOOK, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "CORTEX_HOOK_MODE": "daemon"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    params = {"hook": "raw", "event": "post_recall", "agent_id": "bench", "namespace": "ops",
              "payload": PAYLOAD, "deadline_ms": 2000}

    async def fire() -> Any:
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "hook.fire",
                                "params": params}).encode() + b"\n")
        return json.loads(await stdout.readline())

    try:
        return percentiles(await timed(fire, runs=runs, warmup=50))
    finally:
        stdin.close()
        await proc.wait()


async def main() -> dict[str, Any]:
    daemon = {"name": "bench", "events": ["post_recall"], "mode": "daemon", "command": HOOK}
    execd = {"name": "bench", "events": ["pre_store"], "mode": "exec", "command": HOOK}
    results = {
        "no_hooks_fire": await measure([], "post_recall", runs=20000),
        "raw_pipe_floor": await raw_pipe_floor(runs=3000),
        "daemon_round_trip": await measure([daemon], "post_recall", runs=3000),
        # Issue 25: a daemon post_recall hook added 0.9 ms (p50) to recalls whose round trip
        # alone is ~0.2 ms. The same ten-hit payload back to back, then with the recall
        # bench's pause before each fire: the difference is the hook process (and then the
        # server) waking from sleep and waiting for a core, not the payload. The server's own
        # CPU per fire grows with the pause too (server_cpu_*: about fourfold here, docs/adr/0076):
        # a vCPU that halted runs its next few hundred microseconds of work cold.
        "daemon_round_trip_recall_payload": await measure(
            [daemon], "post_recall", runs=1000, payload=RECALL_PAYLOAD),
        "daemon_round_trip_recall_payload_after_10ms_idle": await measure(
            [daemon], "post_recall", runs=1000, payload=RECALL_PAYLOAD, gap_s=RECALL_GAP_S),
        "exec_spawn": await measure([execd], "pre_store", runs=40),
    }
    dr = results["daemon_round_trip"]
    return {
        "benchmark": "hooks",
        "load_average_1m": round(os.getloadavg()[0], 2),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "shared 2-core machine; other work may run concurrently"},
        "goals": {"daemon_round_trip_p50_ms": 0.5, "daemon_round_trip_p99_ms": 2.0},
        "met": {"daemon_round_trip_p50": dr["p50_ms"] <= 0.5,
                "daemon_round_trip_p99": dr["p99_ms"] <= 2.0},
        "results": results,
    }


if __name__ == "__main__":
    report = asyncio.run(main())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
