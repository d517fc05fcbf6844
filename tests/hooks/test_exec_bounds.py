"""Exec hooks that misbehave at concurrency: every call returns inside the class deadline
(kill and reap included) and leaves no descriptor, child or grandchild behind.

Reproduces issue 13: a hook writing more than ``max_output_bytes`` held 5 of 60 calls at
concurrency 10 for over 20 s against a 5 s class deadline, and the server's descriptors grew.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hack.support.waiting import await_until

from attested_cortex.hooks import HookPipeline
from attested_cortex.hooks.events import deadline_ms
from tests.hooks.conftest import PipelineFactory, alive, hook

pytestmark = pytest.mark.spawns  # hook executables (and their grandchildren) as processes

#: The issue's reproduction: drain stdin, then print 3 MB.
FLOOD = ["sh", "-c", "cat >/dev/null; head -c 3000000 /dev/zero"]
#: Slack over the class deadline for the event loop to hand the answer back under load.
SLACK_S = 1.0
#: Open descriptors and child pids before a test: what may stay after it.
Baseline = tuple[set[str], set[int]]


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def children() -> list[int]:
    """Live or zombie processes whose parent is this test process."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me:
            found.append(int(entry))
    return found


async def burst(
    pipeline: HookPipeline, *, calls: int, concurrency: int,
    payload: Callable[[int], dict[str, object]],
) -> list[str | None]:
    """``calls`` fires of pre_store, ``concurrency`` at a time; each must end inside the
    class deadline (plus slack); the failure cause of each."""
    gate = asyncio.Semaphore(concurrency)
    limit_s = deadline_ms("pre_store") / 1000 + SLACK_S

    async def one(i: int) -> str | None:
        async with gate, asyncio.timeout(limit_s):
            result = await pipeline.fire("pre_store", payload(i), agent_id="a", namespace="n")
        return result.records[0].failure

    return list(await asyncio.gather(*(one(i) for i in range(calls))))


async def leaves_nothing(before: Baseline) -> None:
    """No new descriptor and no new child (running or unreaped) stays once the calls are
    done (the suite's own servers are children of this process too: they were there before)."""
    fds, kids = before
    await await_until(lambda: open_fds() <= fds and set(children()) <= kids, seconds=10)


@pytest.fixture
async def fds() -> Baseline:
    return open_fds(), set(children())


async def test_over_cap_output_at_concurrency(
    make_pipeline: PipelineFactory, fds: Baseline
) -> None:
    pipeline = await make_pipeline({"name": "flood", "events": ["pre_store"], "command": FLOOD,
                                    "timeout_ms": 5000, "max_output_bytes": 65536})
    causes = await burst(pipeline, calls=60, concurrency=10, payload=lambda i: {"n": i})
    assert causes == ["oversized"] * 60
    await leaves_nothing(fds)


async def test_over_cap_output_without_reading_stdin(
    make_pipeline: PipelineFactory, fds: Baseline
) -> None:
    # The child floods stdout before it reads a large request: neither side may block.
    flood = ["sh", "-c", "head -c 3000000 /dev/zero"]
    pipeline = await make_pipeline({"name": "flood", "events": ["pre_store"], "command": flood,
                                    "max_output_bytes": 1024})
    causes = await burst(pipeline, calls=10, concurrency=10,
                         payload=lambda i: {"content": "x" * 1_000_000})
    assert causes == ["oversized"] * 10
    await leaves_nothing(fds)


async def test_hangs_with_grandchildren_at_concurrency(
    make_pipeline: PipelineFactory, fds: Baseline, tmp_path: Path
) -> None:
    pipeline = await make_pipeline(hook("hang", ["pre_store"], timeout_ms=1500))
    pidfiles = [tmp_path / f"grandchild-{i}.pid" for i in range(20)]
    causes = await burst(pipeline, calls=20, concurrency=10,
                         payload=lambda i: {"behave": {"grandchild": str(pidfiles[i])}})
    assert causes == ["timeout"] * 20
    grandchildren = [int(p.read_text()) for p in pidfiles]
    await await_until(lambda: not any(alive(pid) for pid in grandchildren), seconds=10)
    await leaves_nothing(fds)


async def test_crashes_at_concurrency(make_pipeline: PipelineFactory, fds: Baseline) -> None:
    pipeline = await make_pipeline(hook("crash", ["pre_store"], behave={"crash": True}))
    causes = await burst(pipeline, calls=40, concurrency=10, payload=lambda i: {})
    assert causes == ["crash"] * 40
    await leaves_nothing(fds)


async def test_grandchild_holding_stdout_cannot_hold_the_call(
    make_pipeline: PipelineFactory, fds: Baseline, tmp_path: Path
) -> None:
    # The hook answers and exits, but a grandchild that left the session keeps stdout open:
    # no EOF ever comes. The call ends at its budget and closes its end of the pipe.
    pidfile = tmp_path / "escaped.pid"
    script = f"setsid sleep 300 & echo $! > {pidfile}; echo '{{\"decision\": \"allow\"}}'"
    pipeline = await make_pipeline({"name": "escape", "events": ["pre_store"],
                                    "command": ["sh", "-c", script], "timeout_ms": 800})
    try:
        causes = await burst(pipeline, calls=1, concurrency=1, payload=lambda i: {})
        assert causes == ["timeout"]
        await await_until(lambda: open_fds() <= fds[0], seconds=10)
    finally:
        escaped = int(pidfile.read_text())
        os.kill(escaped, 9)  # it left our session and group: only its pid can stop it


async def test_answers_still_arrive_at_concurrency(
    make_pipeline: PipelineFactory, fds: Baseline
) -> None:
    pipeline = await make_pipeline(hook("ok", ["pre_store"]))
    causes = await burst(pipeline, calls=30, concurrency=10, payload=lambda i: {})
    assert causes == [None] * 30
    await leaves_nothing(fds)
