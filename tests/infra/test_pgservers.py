"""hack/support/pgservers.py as a library and as ``python -m hack.support.pgservers``.

Covers what the fixtures do not: the command that ``make run`` and the benchmarks use, clean
shutdown on SIGINT/SIGTERM, no postmaster outliving a killed parent, and each refusal.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hack.support.pgservers import (
    PgServer,
    PgSetupError,
    age_root,
    fast_tmpdir,
    start_pg15,
    start_pg_age,
)

pytestmark = pytest.mark.pg  # starts PostgreSQL servers itself

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the postgres user can reach (pytest's tmp_path is private to root)."""
    path = fast_tmpdir("attested-cortex-test-")
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


def _start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hack.support.pgservers", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_line(process: subprocess.Popen[str]) -> str:
    """The DSN the command prints once the server is up (bounded wait)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=WAIT_S), "the server command printed nothing"
    return process.stdout.readline().strip()


def _postmaster_pid(dsn: str) -> tuple[int, Path]:
    """The postmaster (parent of our backend) and the data directory as the server sees it."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_backend_pid(), current_setting('data_directory')").fetchone()
        assert row is not None
        # Read while connected: the backend exits as soon as the connection closes.
        status = Path(f"/proc/{row[0]}/status").read_text()
    return int(status.split("PPid:")[1].split()[0]), Path(row[1])


def _wait_gone(pid: int) -> bool:
    """Bounded wait for a process to disappear (pidfd: no polling interval needed)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        gone = bool(selector.select(timeout=WAIT_S))
    os.close(fd)
    return gone


@pytest.mark.age
def test_start_age_serves_until_sigterm_then_cleans_up(workdir: Path) -> None:
    process = _start_cli("start-age", "--dir", str(workdir))
    dsn = _first_line(process)
    assert dsn.startswith("postgresql://postgres@127.0.0.1:")
    assert (workdir / "dsn").read_text().strip() == dsn
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SHOW shared_preload_libraries").fetchone() == ("age",)
    postmaster, data_inner = _postmaster_pid(dsn)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=WAIT_S) == 0
    assert _wait_gone(postmaster)
    assert not (age_root() / str(data_inner).lstrip("/")).exists()  # the mount point
    assert sorted(p.name for p in workdir.iterdir()) == ["age.log", "dsn"]


def test_start_pg15_on_a_given_port_stops_on_sigint(workdir: Path, unused_port: int) -> None:
    process = _start_cli("start-pg15", "--dir", str(workdir), "--port", str(unused_port))
    dsn = _first_line(process)
    assert dsn == f"postgresql://postgres@127.0.0.1:{unused_port}/postgres"
    postmaster, data_dir = _postmaster_pid(dsn)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=WAIT_S) == 0
    assert _wait_gone(postmaster)
    assert not data_dir.exists()


def test_postmaster_does_not_outlive_a_killed_parent(workdir: Path) -> None:
    process = _start_cli("start-pg15", "--dir", str(workdir))
    postmaster, _ = _postmaster_pid(_first_line(process))
    process.kill()
    process.wait(timeout=WAIT_S)
    assert _wait_gone(postmaster)


def test_taken_port_fails_with_the_server_log(pg15_server: PgServer, workdir: Path) -> None:
    with pytest.raises(PgSetupError, match="Address already in use"):
        start_pg15(workdir, port=pg15_server.port)
    assert [p.name for p in workdir.iterdir()] == ["pg15.log"]  # no data directory left


def test_cli_reports_a_start_failure_and_exits_1(pg15_server: PgServer, workdir: Path) -> None:
    process = _start_cli("start-pg15", "--dir", str(workdir), "--port", str(pg15_server.port))
    out, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 1
    assert out == ""
    assert "error: PostgreSQL did not start" in err


def test_missing_age_root_names_the_fixing_command(workdir: Path) -> None:
    with pytest.raises(PgSetupError, match=r"hack/pg/ensure-age-root\.sh"):
        start_pg_age(workdir, root=workdir / "no-root-here")


def test_unreachable_directory_is_refused(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(PgSetupError, match="not searchable"):
        start_pg15(private)


@pytest.mark.parametrize("args", [["start-mysql", "--dir", "/tmp/x"], ["start-age"],
                                  ["start-age", "--dir", "/tmp/x", "--port", "http"]])
def test_cli_rejects_bad_arguments(args: list[str]) -> None:
    process = _start_cli(*args)
    _, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 2
    assert "usage:" in err


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
