"""A streaming standby of a private PostgreSQL 15 server, made with the real binaries, and
what a failover does to the two: the primary crashes, the standby is promoted.

Callers: the failover tests (tests/server/test_failover.py). The standby is a
``pg_basebackup -R`` copy of the primary started on its own port; :func:`make_synchronous`
makes the primary wait for it on every commit (what CloudNativePG's ``synchronous: {number:
1}`` sets), so no acknowledged commit can be missing from it when the primary dies.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import psycopg

from hack.support.pgservers import (
    HOST,
    SUPERUSER,
    Layout,
    PgServer,
    PgSetupError,
    _free_port,
    _run,
    _spawn,
    _wait_ready,
    host_runner,
)
from hack.support.waiting import wait_until

#: Acknowledged commits must survive a crash of the server that acknowledged them: the
#: test servers' defaults (synchronous_commit off) trade that for speed.
DURABLE = {"synchronous_commit": "on"}


def start_standby(primary: PgServer, tmpdir: Path) -> PgServer:
    """A hot standby of ``primary`` (PostgreSQL 15), streaming from it, on a new port."""
    runner = host_runner()
    data = tmpdir / f"standby-{uuid.uuid4().hex[:8]}"
    data.mkdir(mode=0o700)
    if runner.uid >= 0:
        os.chown(data, runner.uid, runner.gid)
    _run(runner.argv("pg_basebackup", "-h", HOST, "-p", str(primary.port), "-U", SUPERUSER,
                     "-D", str(data), "-R", "-X", "stream", "-c", "fast"),
         what="pg_basebackup")
    port = _free_port()
    log = tmpdir / "standby.log"
    process = _spawn(runner, layout=Layout(data_host=data, data_inner=str(data)), log=log,
                     port=port)
    if not _wait_ready(process, port=port, data_inner=str(data)):
        raise PgSetupError(f"the standby did not start; see {log}")
    return PgServer(kind="pg15", port=port, version=primary.version, data_dir=data,
                    process=process)


def make_synchronous(primary: PgServer) -> None:
    """Every commit on ``primary`` waits until its standby has flushed it."""
    with psycopg.connect(primary.admin_dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        conn.execute("SELECT pg_reload_conf()")

    def synchronous() -> bool:
        with psycopg.connect(primary.admin_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_replication"
                               " WHERE sync_state = 'sync'").fetchone()
        return row is not None and row[0] == 1

    wait_until(synchronous, what="the standby to be synchronous", seconds=30)


def crash(server: PgServer) -> None:
    """Immediate shutdown (what ``pg_ctl -m immediate`` sends: SIGQUIT): no checkpoint,
    every session cut; a restart runs crash recovery."""
    server.process.send_signal(signal.SIGQUIT)
    server.process.wait(timeout=30)


def promote(standby: PgServer) -> None:
    """End recovery on ``standby``: it accepts writes once this returns."""
    with psycopg.connect(standby.admin_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_promote(true, 60)").fetchone()
    if row is None or row[0] is not True:
        raise PgSetupError("the standby was not promoted within 60 s")


def kill_backends(server: PgServer, dbname: str) -> int:
    """SIGKILL one client backend of ``dbname``: the postmaster ends every session and
    restarts through crash recovery (a backend crash, or a pod's process killed). Returns
    the number of backends that were connected."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s"
            " AND backend_type = 'client backend'", (dbname,)).fetchall()]
    if pids:
        os.kill(pids[0], signal.SIGKILL)
    return len(pids)
