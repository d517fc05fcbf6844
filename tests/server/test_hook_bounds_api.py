"""Issue 13's first reproduction over HTTP: a pre_store exec hook that prints more than its
``max_output_bytes``, 60 stores at concurrency 10. On 9800398 five never returned (over 20 s
against the 5 s write-class deadline) and the server's descriptors grew; now every store
answers (fail-open: 201) inside the class deadline and nothing stays open."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import yaml
from hack.support.waiting import await_until

from attested_cortex.hooks.events import deadline_ms
from tests.support.cortex import MakeCortex

FLOOD = ["sh", "-c", "cat >/dev/null; head -c 3000000 /dev/zero"]


async def test_over_cap_hook_output_at_concurrency_10(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(yaml.safe_dump({"version": 1, "hooks": [{
        "name": "flood", "events": ["pre_store"], "mode": "exec", "command": FLOOD,
        "timeout_ms": 5000, "max_output_bytes": 65536}]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=hooks,
                               graph_backend="CTE")
    before = pipes()
    gate = asyncio.Semaphore(10)
    limit_s = deadline_ms("pre_store") / 1000 + 2.0  # the class deadline, and slack for HTTP

    async def one(i: int) -> int:
        async with gate, asyncio.timeout(limit_s):
            reply = await client.call("POST", "/v1/memories",
                                      {"namespace": "kb", "content": f"m{i}"})
            return reply.status

    assert await asyncio.gather(*(one(i) for i in range(60))) == [201] * 60
    # Sockets may stay (the pool and the client keep connections); hook pipes may not.
    await await_until(lambda: pipes() <= before, what="the hook pipes closed", seconds=10,
                      interval_s=0.01)  # the kernel's descriptor table has no event to await


def pipes() -> set[str]:
    """This process's open pipe descriptors (how a hook's stdin and stdout are held)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                found.add(fd)
        except OSError:
            continue
    return found
