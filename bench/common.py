"""Shared benchmark helpers: percentiles, result files, a throwaway PostgreSQL server."""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
#: Extra settings for the benchmark server, on top of hack/support/pgservers.py's defaults.
#: 64MB of shared buffers cannot hold a 400k-link graph, so the bench gives it 512MB. Commits stay
#: as on the test servers (synchronous_commit=off, fsync=off): write figures exclude the WAL flush a
#: durable production commit pays (measured: signed link writes p95 2.9 ms off, 5.8-6.5 ms with
#: synchronous_commit=on even without fsync). The kg bench settles the visibility map itself.
SERVER_SETTINGS = {"shared_buffers": "512MB"}
RESULTS = ROOT / "docs" / "benchmarks"


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    """p50/p95/p99/mean/max of latency samples in milliseconds."""
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"n": len(ordered), "p50": round(q[49], 3), "p95": round(q[94], 3),
            "p99": round(q[98], 3), "mean": round(statistics.fmean(ordered), 3),
            "max": round(ordered[-1], 3)}


def write_result(area: str, data: dict[str, Any]) -> Path:
    """Write ``docs/benchmarks/<area>.json`` with machine facts and the command."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{area}.json"
    data = {
        "area": area,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    "load_average_at_write": [round(x, 2) for x in os.getloadavg()]},
        "command": f"make bench (python -m bench {area})",
        **data,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


@contextmanager
def age_server() -> Iterator[Any]:
    """PostgreSQL 17 + AGE (the production database) in a temp dir for the run."""
    from hack.support.pgservers import start_pg_age

    with tempfile.TemporaryDirectory(prefix="cortex-bench-") as tmp:
        server = start_pg_age(Path(tmp), settings=SERVER_SETTINGS)
        try:
            yield server
        finally:
            server.stop()


def create_database(server: Any, name: str) -> str:
    """A new empty database on ``server``; returns its DSN."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    dsn: str = server.dsn(name)
    return dsn


def embedded_behind(base: str, *, seconds: float = 600) -> float:
    """Wait (bounded) until the server's write-behind embedder holds nothing more (every
    memory written so far has its vector, or was left to the backfill); seconds waited."""
    import time
    import urllib.request

    started = time.perf_counter()
    while True:
        request = urllib.request.Request(f"{base}/v1/capabilities",
                                         headers={"X-Agent-Id": "bench"})
        with urllib.request.urlopen(request, timeout=10) as response:
            behind = json.load(response)["recall"].get("write_behind")
        waited = time.perf_counter() - started
        if behind is None or behind["queued"] == 0:
            return waited
        if waited > seconds:
            raise TimeoutError(f"write-behind still holds {behind} after {seconds}s")
        time.sleep(0.02)  # polling interval of a bounded wait


def cpu_seconds(pid: int | None) -> float:
    """User plus system CPU seconds process ``pid`` has used so far (0 without one): a
    server's CPU per request is far less sensitive to the shared machine's load than its
    rate."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def unthrottled_config(directory: Path) -> Path:
    """A server config without the per-agent rate quota (default 100/s): a benchmark sends
    hundreds of requests a second as one agent and measures latency, not the 429s."""
    path = directory / "bench-unthrottled.yaml"
    path.write_text("quotas:\n  enabled: false\n")
    return path
