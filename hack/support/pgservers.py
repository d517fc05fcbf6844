"""Private, throw-away PostgreSQL servers: 15 from the host, 17 + Apache AGE from a cached root.

Callers: tests/support/postgres.py (the pytest fixtures), and ``make run`` / the benchmarks through
``python -m hack.support.pgservers start-age --dir DIR [--port N]`` (see ``main``).

Each server is a fresh cluster (initdb, trust auth on loopback, fsync off) whose postmaster runs in
the foreground as a child of this process, as the unprivileged ``postgres`` user, on 127.0.0.1
only. The AGE server's binaries run inside the Debian trixie root built by
hack/pg/ensure-age-root.sh; ``chroot`` shares the network namespace, so the host connects over TCP.
The postmaster gets SIGINT (fast shutdown) if the thread that started it dies, so a killed test run
leaves no server behind. A missing prerequisite raises ``PgSetupError`` naming the fixing command.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import sql

from hack.support.waiting import WaitTimeout, wait_until

__all__ = [
    "APP_ROLE",
    "SUPERUSER",
    "PgServer",
    "PgSetupError",
    "age_root",
    "fast_tmpdir",
    "pause",
    "resume",
    "start_pg15",
    "start_pg_age",
]

ServerKind = Literal["pg15", "age"]
SUPERUSER = "postgres"
APP_ROLE = "cortex_app"
HOST = "127.0.0.1"
PG15_BIN = "/usr/lib/postgresql/15/bin"
PG17_BIN = "/usr/lib/postgresql/17/bin"
AGE_ROOT_STAMP = ".attested-cortex-root"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
BIND_ATTEMPTS = 3
INITDB_OPTIONS = ("-U", SUPERUSER, "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8",
                  "--no-sync", "--no-instructions", "--wal-segsize=1")


class PgSetupError(RuntimeError):
    """A prerequisite is missing or a server would not start; the message says what to run."""


@dataclass(frozen=True)
class Runner:
    """How to run a cluster's binaries: a command prefix (user switch, chroot) and its root."""

    prefix: tuple[str, ...]
    bindir: str
    root: Path = Path("/")
    uid: int = -1
    gid: int = -1

    def argv(self, program: str, *args: str) -> list[str]:
        return [*self.prefix, f"{self.bindir}/{program}", *args]

    def host_path(self, inner: str) -> Path:
        return self.root / inner.lstrip("/")


@dataclass(frozen=True)
class Layout:
    """Where a cluster's files live on the host, and the path its postmaster sees them at.

    The AGE server's data stays outside its root (in the caller's tmpdir, ideally on tmpfs): the
    postmaster runs in a private mount namespace where ``data_host`` is bound onto ``mountpoint``.
    """

    data_host: Path
    data_inner: str
    mountpoint: Path | None = None


@dataclass(frozen=True)
class PgServer:
    """A running private cluster; ``stop()`` shuts it down and removes its data directory."""

    kind: ServerKind
    port: int
    version: str
    data_dir: Path
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)
    mountpoint: Path | None = None

    @property
    def has_age(self) -> bool:
        return self.kind == "age"

    @property
    def admin_dsn(self) -> str:
        return self.dsn("postgres")

    def dsn(self, dbname: str) -> str:
        """A superuser DSN for ``dbname``."""
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{dbname}"

    def app_dsn(self, dbname: str) -> str:
        """A DSN for the login role ``cortex_app``: no superuser, no CREATEDB, no CREATEROLE."""
        return f"postgresql://{APP_ROLE}@{HOST}:{self.port}/{dbname}"

    def create_database(self, name: str) -> None:
        """An empty database from template0, owned by the superuser."""
        self._admin(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))

    def drop_database(self, name: str) -> None:
        """Drops ``name``, disconnecting whoever is still in it."""
        query = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        self._admin(query)

    def stop(self) -> None:
        _stop_process(self.process)
        _remove(Layout(data_host=self.data_dir, data_inner="", mountpoint=self.mountpoint))

    def _admin(self, query: sql.Composed) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(query)


def host_runner() -> Runner:
    """PostgreSQL 15 from the host's packages, switched to the ``postgres`` user when root."""
    if not Path(PG15_BIN, "initdb").exists():
        raise PgSetupError(f"{PG15_BIN}/initdb is missing; run: hack/ensure-system-packages.sh")
    if os.geteuid() != 0:
        return Runner(prefix=(), bindir=PG15_BIN)
    uid, gid = _host_id("-u"), _host_id("-g")
    return Runner(prefix=_setpriv("postgres"), bindir=PG15_BIN, uid=uid, gid=gid)


def age_runner(root: Path | None = None) -> Runner:
    """PostgreSQL 17 + AGE inside the cached trixie root, as the root's own ``postgres`` user."""
    root = root or age_root()
    if not (root / AGE_ROOT_STAMP).is_file():
        raise PgSetupError(f"no PostgreSQL+AGE root at {root}; run: hack/pg/ensure-age-root.sh")
    if os.geteuid() != 0:
        raise PgSetupError("the PostgreSQL+AGE server runs through chroot, which needs root")
    uid, gid = _passwd_ids(root / "etc/passwd", "postgres")
    chroot = ("chroot", f"--userspec={uid}:{gid}", "--groups", str(gid), str(root))
    return Runner(prefix=(*chroot, "/usr/bin/setpriv", "--pdeathsig", "INT"), bindir=PG17_BIN,
                  root=root, uid=uid, gid=gid)


def age_root() -> Path:
    """Where hack/pg/ensure-age-root.sh keeps the root (honours ATTESTED_CORTEX_CACHE)."""
    cache = os.environ.get("ATTESTED_CORTEX_CACHE") or str(Path.home() / ".cache/attested-cortex")
    return Path(cache) / "pg-age-trixie"


def start_pg15(tmpdir: Path, *, port: int | None = None,
               settings: Mapping[str, str] | None = None) -> PgServer:
    """Starts a private PostgreSQL 15 cluster with its data, socket and log under ``tmpdir``.

    ``settings`` are extra postgresql.conf lines (name -> value), appended after the defaults.
    """
    runner = host_runner()
    tmpdir = Path(os.path.abspath(tmpdir))  # lexically, as PostgreSQL reports data_directory
    _check_reachable(tmpdir)
    data = tmpdir / f"pg15-{uuid.uuid4().hex[:8]}"
    layout = Layout(data_host=data, data_inner=str(data))
    return _start(runner, kind="pg15", layout=layout, log=tmpdir / "pg15.log", port=port,
                  settings=settings)


def start_pg_age(tmpdir: Path, *, port: int | None = None, root: Path | None = None,
                 settings: Mapping[str, str] | None = None) -> PgServer:
    """Starts PostgreSQL 17 + AGE with its data, socket and log under ``tmpdir``; see start_pg15."""
    runner = age_runner(root)
    name = f"attested-cortex-{uuid.uuid4().hex[:12]}"
    layout = Layout(data_host=Path(tmpdir) / name, data_inner=f"/tmp/{name}",
                    mountpoint=runner.host_path(f"/tmp/{name}"))
    return _start(runner, kind="age", layout=layout, log=Path(tmpdir) / "age.log", port=port,
                  settings=settings)


def pause(server: PgServer) -> None:
    """Fast-shutdown ``server``'s postmaster but keep its data: the database goes away
    (clients see their sessions terminated, new connections refused) until :func:`resume`."""
    _stop_process(server.process)


def resume(server: PgServer, *, log: Path) -> PgServer:
    """Start a paused PostgreSQL 15 server again on its port; returns the running server."""
    if server.kind != "pg15":
        raise PgSetupError("only PostgreSQL 15 servers can be paused and resumed")
    layout = Layout(data_host=server.data_dir, data_inner=str(server.data_dir))
    process = _spawn(host_runner(), layout=layout, log=log, port=server.port)
    if not _wait_ready(process, port=server.port, data_inner=layout.data_inner):
        raise PgSetupError(f"PostgreSQL did not restart; its log ({log}) ends:\n{_tail(log)}")
    return dataclasses.replace(server, process=process)


def fast_tmpdir(prefix: str) -> Path:
    """A new directory the postgres user can reach, on tmpfs when there is one (much faster)."""
    shm = "/dev/shm"
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=shm if os.access(shm, os.W_OK) else None))
    path.chmod(0o755)
    return path


def _start(runner: Runner, *, kind: ServerKind, layout: Layout, log: Path, port: int | None,
           settings: Mapping[str, str] | None = None) -> PgServer:
    try:
        _initdb(runner, layout=layout, preload_age=kind == "age", settings=settings or {})
        process, port = _launch(runner, layout=layout, log=log, port=port)
    except BaseException:
        _remove(layout)
        raise
    server = PgServer(kind=kind, port=port, version="", data_dir=layout.data_host,
                      process=process, mountpoint=layout.mountpoint)
    try:
        version = _bootstrap(server)
    except BaseException:
        server.stop()
        raise
    return dataclasses.replace(server, version=version)


def _remove(layout: Layout) -> None:
    shutil.rmtree(layout.data_host, ignore_errors=True)
    if layout.mountpoint is not None and layout.mountpoint.is_dir():
        layout.mountpoint.rmdir()  # empty: the bind lived only in the postmaster's namespace


def _initdb(runner: Runner, *, layout: Layout, preload_age: bool,
            settings: Mapping[str, str]) -> None:
    """A new cluster: a copy of a pristine initdb made once per server build."""
    layout.data_host.parent.mkdir(parents=True, exist_ok=True)
    if layout.mountpoint is not None:
        layout.mountpoint.mkdir()
    _run(["cp", "-a", str(_template(runner)), str(layout.data_host)], what="copying initdb")
    with (layout.data_host / "postgresql.conf").open("a") as conf:
        conf.write(_config(socket_dir=layout.data_inner, preload_age=preload_age))
        conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())


def _template(runner: Runner) -> Path:
    """A pristine cluster in the server's /tmp, keyed by server version and initdb options.

    Copying it takes a fraction of a second where initdb takes seconds. Racing builders each
    initdb into their own staging directory; the first rename wins and the others are discarded.
    """
    version = subprocess.run(runner.argv("postgres", "-V"), capture_output=True, text=True,
                             check=True).stdout
    key = hashlib.sha256(" ".join([version, *INITDB_OPTIONS]).encode()).hexdigest()[:12]
    inner = f"/tmp/attested-cortex-initdb-{key}"
    template = runner.host_path(inner)
    if not _usable_template(template, runner):
        staging = f"{inner}.{uuid.uuid4().hex[:8]}"
        _initdb_into(runner, data_inner=staging)
        try:
            runner.host_path(staging).rename(template)
        except OSError:  # another process finished first
            shutil.rmtree(runner.host_path(staging), ignore_errors=True)
    return template


def _usable_template(template: Path, runner: Runner) -> bool:
    if not (template / "PG_VERSION").is_file():
        return False
    return runner.uid < 0 or template.stat().st_uid == runner.uid


def _initdb_into(runner: Runner, *, data_inner: str) -> None:
    data = runner.host_path(data_inner)
    data.mkdir(mode=0o700, parents=True)
    if runner.uid >= 0:
        os.chown(data, runner.uid, runner.gid)
    _run(runner.argv("initdb", "-D", data_inner, *INITDB_OPTIONS), what="initdb")


def _config(*, socket_dir: str, preload_age: bool) -> str:
    lines = [
        "listen_addresses = '127.0.0.1'",
        f"unix_socket_directories = '{socket_dir}'",
        "fsync = off",
        "synchronous_commit = off",
        "full_page_writes = off",
        "max_connections = 200",
        "shared_buffers = 64MB",
        "jit = off",
    ]
    if preload_age:
        lines.append("shared_preload_libraries = 'age'")
    return "\n# attested-cortex test server\n" + "\n".join(lines) + "\n"


def _launch(runner: Runner, *, layout: Layout, log: Path, port: int | None,
            ) -> tuple[subprocess.Popen[bytes], int]:
    """Starts the postmaster; retries on a fresh port if the chosen free one was taken meanwhile."""
    for _ in range(BIND_ATTEMPTS):
        chosen = port or _free_port()
        process = _spawn(runner, layout=layout, log=log, port=chosen)
        if _wait_ready(process, port=chosen, data_inner=layout.data_inner):
            return process, chosen
        if port is not None or "could not bind" not in _tail(log):
            break
    raise PgSetupError(f"PostgreSQL did not start; its log ({log}) ends with:\n{_tail(log)}")


def _spawn(runner: Runner, *, layout: Layout, log: Path, port: int) -> subprocess.Popen[bytes]:
    argv = runner.argv("postgres", "-D", layout.data_inner, "-p", str(port))
    if layout.mountpoint is not None:
        # A private mount namespace: the bind vanishes with the postmaster, whatever happens.
        argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                'mount --bind "$0" "$1" && shift && exec "$@"',
                str(layout.data_host), str(layout.mountpoint), *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        # A session of its own: a Ctrl-C in the terminal reaches us, and we stop it in order.
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_ready(process: subprocess.Popen[bytes], *, port: int, data_inner: str) -> bool:
    """Polls until *our* server answers (True), or it exits or times out (False).

    Whoever answers must serve ``data_inner``: when the port was taken, the answer comes from a
    stranger while our postmaster is failing to bind.
    """
    dsn = f"postgresql://{SUPERUSER}@{HOST}:{port}/postgres"

    def settled() -> str | None:
        if _serves(dsn, data_inner=data_inner):
            return "serves"
        return "exited" if process.poll() is not None else None

    with contextlib.suppress(WaitTimeout):
        if wait_until(settled, what=f"our server on port {port}", seconds=START_TIMEOUT_S,
                      interval_s=0.02) == "serves":
            return True
    _stop_process(process)
    return False


def _serves(dsn: str, *, data_inner: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    except psycopg.Error:
        return False
    return row is not None and row[0] == data_inner


def _bootstrap(server: PgServer) -> str:
    """Creates the unprivileged app role and returns the server version ("15.10", "17.5")."""
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
                     .format(sql.Identifier(APP_ROLE)))
        row = conn.execute("SHOW server_version").fetchone()
    assert row is not None
    return str(row[0]).split()[0]


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown (SIGINT), then SIGKILL if the postmaster has not exited in time."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _run(argv: list[str], *, what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PgSetupError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _setpriv(user: str) -> tuple[str, ...]:
    return ("setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--pdeathsig", "INT")


def _host_id(flag: Literal["-u", "-g"]) -> int:
    return int(subprocess.run(["id", flag, "postgres"], capture_output=True, text=True,
                              check=True).stdout)


def _passwd_ids(passwd: Path, user: str) -> tuple[int, int]:
    for line in passwd.read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise PgSetupError(f"no {user} user in {passwd}; rebuild with: hack/pg/ensure-age-root.sh")


def _check_reachable(tmpdir: Path) -> None:
    """The ``postgres`` user must be able to walk down to ``tmpdir`` (pytest's own are 0700)."""
    for parent in [tmpdir.resolve(), *tmpdir.resolve().parents]:
        if parent.stat().st_mode & 0o001 == 0:
            raise PgSetupError(f"{parent} is not searchable by other users, so the postgres "
                               f"user cannot reach {tmpdir}; use fast_tmpdir() or a 0755 "
                               "directory in /tmp")


def main(argv: list[str] | None = None) -> int:
    """``start-age|start-pg15 --dir DIR [--port N]``: prints the DSN, serves until SIGINT/TERM."""
    parser = argparse.ArgumentParser(prog="python -m hack.support.pgservers")
    parser.add_argument("command", choices=["start-age", "start-pg15"])
    parser.add_argument("--dir", type=Path, required=True, help="work directory (log, DSN file)")
    parser.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        server = _start_for_cli(args.command, workdir=args.dir, port=args.port)
    except PgSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # taken by sigtimedwait below
    print(server.admin_dsn, flush=True)
    print(f"app role DSN: {server.app_dsn('postgres')}; log in {args.dir}", file=sys.stderr)
    try:
        while server.process.poll() is None:
            if signal.sigtimedwait(stop_signals, 1.0) is not None:
                return 0
        print(f"error: PostgreSQL exited on its own; see {args.dir}", file=sys.stderr)
        return 1
    finally:
        server.stop()


def _start_for_cli(command: str, *, workdir: Path, port: int | None) -> PgServer:
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)
    server = start_pg_age(workdir, port=port) if command == "start-age" else start_pg15(
        workdir, port=port)
    (workdir / "dsn").write_text(server.admin_dsn + "\n")
    return server


if __name__ == "__main__":
    sys.exit(main())
