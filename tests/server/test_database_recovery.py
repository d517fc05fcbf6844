"""The server across a database that goes away and comes back (issues 13 and 38): a request
that arrives while it is away waits for it, boundedly (ADR 0126): it completes once the
database answers within ``db_reconnect_wait_ms`` and is answered 503 with Retry-After when it
does not (never a hang); readyz says "unreachable" at once; readiness returns as soon as the
database is back, and an idle server's first requests after a restart all succeed.

Each test runs its own PostgreSQL 15 (it is stopped and started). The figures (how soon) are
measured by ``bench/recovery.py`` into docs/benchmarks/recovery.json and, for a failover, by
``bench/ha.py``, not asserted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hack.support.pgservers import PgServer, fast_tmpdir, pause, resume, start_pg15
from hack.support.waiting import await_until

from attested_cortex.store.migrating import migrate
from tests.support.cortex import CortexClient, MakeCortex

pytestmark = pytest.mark.pg  # runs a PostgreSQL 15 of its own (hack.support.pgservers)

#: Generous bounds for "eventually": the behaviour, not the speed, is under test.
SETTLE_S = 10.0


class Restartable:
    """A private server that tests stop and start."""

    def __init__(self, server: PgServer, workdir: Path) -> None:
        self.server = server
        self.workdir = workdir

    def stop(self) -> None:
        pause(self.server)

    def start(self) -> None:
        self.server = resume(self.server, log=self.workdir / "restart.log")


@pytest.fixture
def restartable() -> Iterator[Restartable]:
    workdir = fast_tmpdir("cortex-recovery-")
    handle = Restartable(start_pg15(workdir), workdir)
    try:
        yield handle
    finally:
        handle.server.stop()


#: A short wait for the database in the tests that keep it away (seconds of test time each).
SHORT_WAIT_MS = 300


@pytest.fixture
async def serve(make_cortex: MakeCortex,
                restartable: Restartable) -> Callable[..., Awaitable[CortexClient]]:
    restartable.server.create_database("cortex")
    dsn = restartable.server.dsn("cortex")
    await migrate(dsn)

    async def start(**settings: Any) -> CortexClient:
        return await make_cortex(dsn, migrated=False, graph_backend="CTE", **settings)

    return start


@pytest.fixture
async def served(serve: Callable[..., Awaitable[CortexClient]]) -> CortexClient:
    return await serve()


async def status_becomes(client: CortexClient, path: str, status: int) -> None:
    async def answers() -> bool:
        return (await client.call("GET", path)).status == status

    # a remote status: no event to await
    await await_until(answers, what=f"{path} answering {status}", seconds=SETTLE_S,
                      interval_s=0.01)


async def test_away_past_the_wait_is_503_and_back_is_ready(
    serve: Callable[..., Awaitable[CortexClient]], restartable: Restartable,
) -> None:
    served = await serve(db_reconnect_wait_ms=SHORT_WAIT_MS)
    await served.store("kb", "kept alpha")
    restartable.stop()
    await status_becomes(served, "/readyz", 503)
    ready = await served.call("GET", "/readyz")
    assert ready.body["checks"]["database"]["ok"] is False
    assert "unreachable" in ready.body["checks"]["database"]["message"]
    for _ in range(2):  # every write and read answers 503 in the envelope, none hangs
        write = await served.call("POST", "/v1/memories", {"namespace": "kb", "content": "x"})
        assert write.status == 503 and write.body["error"]["code"] == "not_ready", write.text
        assert write.headers["Retry-After"] == "1"
        read = await served.call("POST", "/v1/recall", {"query": "alpha"})
        assert read.status == 503, read.text
    restartable.start()
    await status_becomes(served, "/readyz", 200)
    await served.store("kb", "after")
    recalled = await served.call("POST", "/v1/recall", {"query": "alpha"})
    assert [r["content"] for r in recalled.body["results"]] == ["kept alpha"]


async def test_no_failed_request_after_an_idle_restart(
    served: CortexClient, restartable: Restartable,
) -> None:
    # Fill the pool with several idle connections, then restart the database while idle.
    first = await asyncio.gather(*(served.store("kb", f"m{i}") for i in range(8)))
    restartable.stop()
    restartable.start()
    replies = await asyncio.gather(
        served.call("GET", "/readyz"),
        *(served.call("POST", "/v1/memories", {"namespace": "kb", "content": f"n{i}"})
          for i in range(8)),
        *(served.call("GET", f"/v1/memories/{m['id']}") for m in first),
        served.call("POST", "/v1/recall", {"query": "m1"}),
    )
    assert [r.status for r in replies] == [200] + [201] * 8 + [200] * 9, [
        (r.status, r.text) for r in replies if r.status >= 300]


async def test_a_database_that_never_answers_is_503_within_the_ready_bound(
    served: CortexClient, restartable: Restartable,
) -> None:
    # SIGSTOP: the postmaster and its backends stop answering but keep their sockets open
    # (a hung or partitioned host). readyz must still answer, 503, rather than hang.
    import os
    import signal

    restartable.stop()
    restartable.start()
    pids = [restartable.server.process.pid]
    os.kill(pids[0], signal.SIGSTOP)
    try:
        reply = await served.call("GET", "/readyz")
        assert reply.status == 503
        assert "did not answer" in reply.body["checks"]["database"]["message"] or (
            "unreachable" in reply.body["checks"]["database"]["message"])
    finally:
        os.kill(pids[0], signal.SIGCONT)
    await status_becomes(served, "/readyz", 200)


async def test_a_write_sent_while_the_database_is_away_completes_when_it_returns(
    serve: Callable[..., Awaitable[CortexClient]], restartable: Restartable,
) -> None:
    # A failover: the write arrives while no primary answers and one answers a moment later.
    # It waits for it inside the server (ADR 0126) rather than being sent back for a whole
    # Retry-After second; the old pool answered 503 at once.
    served = await serve()  # the default wait (8 s), well past a local restart
    await served.store("kb", "before")
    restartable.stop()
    await status_becomes(served, "/readyz", 503)  # readiness does not wait: it says so
    write = asyncio.ensure_future(served.call(
        "POST", "/v1/memories", {"namespace": "kb", "content": "sent while away"},
        headers={"Idempotency-Key": "away-1"}))
    await asyncio.to_thread(restartable.start)  # the request is in the server meanwhile
    answered = await write
    assert answered.status == 201, answered.text
    again = await served.call("POST", "/v1/memories",
                              {"namespace": "kb", "content": "sent while away"},
                              headers={"Idempotency-Key": "away-1"})
    assert again.status == 201 and again.body["id"] == answered.body["id"]
    listed = await served.call("POST", "/v1/recall", {"query": "sent while away"})
    assert [r["content"] for r in listed.body["results"]].count("sent while away") == 1


async def test_a_request_waits_no_longer_than_its_bound(
    serve: Callable[..., Awaitable[CortexClient]], restartable: Restartable,
) -> None:
    # The database stays away: the wait ends in a 503 with Retry-After, not a hang. The bound
    # is the behaviour (the client gets an answer it can act on well inside its own timeout).
    served = await serve(db_reconnect_wait_ms=SHORT_WAIT_MS)
    restartable.stop()
    async with asyncio.timeout(SETTLE_S):
        write = await served.call("POST", "/v1/memories", {"namespace": "kb", "content": "x"},
                                  headers={"Idempotency-Key": "never"})
    assert write.status == 503 and write.body["error"]["code"] == "not_ready", write.text
    assert write.headers["Retry-After"] == "1"
