"""The outbox across a database crash (issue 41: "exact delivery after kill -9 ... of the
database"): a writer stores memories, links and transcripts through the server (each write
retried with its Idempotency-Key) while PostgreSQL is shut down at once (SIGQUIT: every
session cut, crash recovery at restart). Afterwards the outbox holds exactly one event per
committed row (none lost, none for a write that did not commit) and a real receiver gets
every one. Reuses the failover test's fixtures. About 3 s."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from hack.support.pgservers import PgServer, resume
from hack.support.replication import crash
from hack.support.waiting import await_until

from tests.server.test_failover import (  # noqa: F401 (fixtures)
    fresh,
    servers,
    workdir,
    write_across,
    writing,
)
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST, subscribe
from tests.support.cortex import MakeCortex
from tests.support.writers import TRANSCRIPTS, Writer

pytestmark = pytest.mark.pg  # runs a PostgreSQL of its own (hack.support.pgservers)

def postmaster_started(dsn: str) -> datetime:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def test_events_equal_committed_rows_across_a_database_crash(
        make_cortex: MakeCortex, workdir: Path, servers: list[PgServer],  # noqa: F811
        writing: list[asyncio.Task[None]]) -> None:  # noqa: F811
    server = await fresh(servers, workdir)
    dsn = server.dsn("cortex")
    async with receiving() as receiver:
        client = await make_cortex(dsn, migrated=False, graph_backend="CTE",
                                   transcripts=TRANSCRIPTS,
                                   subscriptions={**FAST, "max_attempts": 100})
        await subscribe(client, receiver)
        writer = Writer(client)
        started = postmaster_started(dsn)

        async def restart() -> None:
            await asyncio.to_thread(crash, server)
            servers.append(await asyncio.to_thread(resume, server,
                                                   log=workdir / "restart.log"))

        await write_across(writer, writing, restart)
        # The writer may see nothing but a slower answer: the server waits for a database
        # that answers again within db_reconnect_wait_ms (ADR 0126). The postmaster's start
        # time shows the crash happened between acknowledged writes.
        assert postmaster_started(dsn) > started, "the database was never restarted"
        with psycopg.connect(dsn) as conn:
            rows = {f"{kind}:{row[0]}" for kind, table in (
                ("memory", "memories"), ("link", "links"), ("transcript", "transcripts"))
                for row in conn.execute(f"SELECT id FROM {table}").fetchall()}
            events = conn.execute("SELECT seq, key FROM outbox_events").fetchall()
        keys = Counter(key for _, key in events)
        assert set(keys) == rows and set(keys.values()) == {1}  # exactly one per row
        wanted = {f"evt_{seq}" for seq, _ in events}
        await await_until(lambda: wanted <= set(receiver.ids()), seconds=30,
                          what="every event delivered after the crash")
    assert receiver.refused_signatures == 0
