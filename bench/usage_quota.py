"""The storage quota step for an agent holding 100k memories: store throughput over HTTP
(the recall bench's store section, ``--embedder none``) for an empty agent and for one with
100k memories, and the quota step's read (``store.usage.stored``) for that agent.

Run: ``.venv/bin/python -m bench.usage_quota [label]`` (prints JSON; writes nothing). To
compare with another checkout, run it with ``PYTHONPATH=<tree>/operator:<tree>``: the served
process inherits it, so that tree's code and migrations are measured.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from hack.support.served import serve
from psycopg.rows import dict_row

import attested_cortex
from attested_cortex.store import usage as rows
from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, unthrottled_config
from bench.recall import time_stores
from bench.textgen import TextGenerator

HEAVY = 100_000


def heavy_load(dsn: str, agent: str, count: int) -> None:
    """COPY ``count`` generated memories authored by ``agent``."""
    gen = TextGenerator(seed=7)
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY memories (id, namespace, title, content, tags, metadata, author, "
                      "created_at, updated_at) FROM STDIN") as copy:
            for body in gen.memories(count):
                copy.write_row((uuid.uuid4(), body["namespace"], body["title"], body["content"],
                                body["tags"], json.dumps({}), agent, now, now))
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")


async def quota_reads(dsn: str, agent: str, n: int = 300) -> dict[str, Any]:
    """Latency of the quota step's read for ``agent`` (after a warm-up)."""
    async with await psycopg.AsyncConnection.connect(dsn, row_factory=dict_row,
                                                     autocommit=True) as conn:
        for _ in range(20):
            await rows.stored(conn, agent=agent)
        samples: list[float] = []
        for _ in range(n):
            t0 = time.perf_counter()
            used = await rows.stored(conn, agent=agent)
            samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 3),
            "p95_ms": round(samples[int(0.95 * n)], 3), "used": used.total}


def run(tag: str) -> dict[str, Any]:
    """Both store runs and the quota reads, in fresh databases."""
    out: dict[str, Any] = {"tag": tag, "code": attested_cortex.__file__}
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        config = str(unthrottled_config(Path(tmp)))
        dsn = create_database(server, f"q_empty_{tag}")
        asyncio.run(migrate(dsn))
        with serve(dsn, Path(tmp), "--config", config, "--embedder", "none") as served:
            out["stores_empty_agent"] = asyncio.run(
                time_stores(served.base, TextGenerator(seed=13)))
        dsn = create_database(server, f"q_heavy_{tag}")
        asyncio.run(migrate(dsn))
        t0 = time.perf_counter()
        heavy_load(dsn, "bench", HEAVY)
        out["load_100k_s"] = round(time.perf_counter() - t0, 1)
        out["quota_read_100k"] = asyncio.run(quota_reads(dsn, "bench"))
        with serve(dsn, Path(tmp), "--config", config, "--embedder", "none") as served:
            out["stores_agent_with_100k"] = asyncio.run(
                time_stores(served.base, TextGenerator(seed=13)))
        out["quota_read_100k_after_stores"] = asyncio.run(quota_reads(dsn, "bench"))
    for k in ("stores_empty_agent", "stores_agent_with_100k"):
        out[k].pop("latency_ms", None)
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "run"), indent=2))
