"""``make serve``: the cortex server alone on this host (no Kubernetes), with a printed
walkthrough; Ctrl-C stops it. ``make run`` (hack/run.py) is the whole system on the real node.

Brings up PostgreSQL 17 + Apache AGE (the cached trixie root, see hack/pg/), migrates a
database, and serves the cortex API on 127.0.0.1 with dev authentication. Every process
it starts is stopped on exit, and its working directory is removed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attested_cortex.store.migrating import migrate  # noqa: E402
from hack.support.pgservers import start_pg_age  # noqa: E402
from hack.support.served import CORTEXCTL, stop, wait_until_up  # noqa: E402


def pick_port(preferred: int) -> int:
    """``preferred`` when it is free on loopback, otherwise any free port."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen: int = sock.getsockname()[1]
            return chosen
    raise RuntimeError("no free port")


def walkthrough(base: str, dsn: str, workdir: Path) -> str:
    """What to try, printed once everything answers."""
    agent = "-H 'X-Agent-Id: dev:alice' -H 'Content-Type: application/json'"
    memory = ('{"namespace":"org/team","title":"deploys",'
              '"content":"Deploys freeze on Fridays after 3pm"}')
    return textwrap.dedent(f"""
    attested-cortex is running (Ctrl-C stops everything)

      API         {base}   (auth: dev, send X-Agent-Id)
      OpenAPI     {base}/v1/openapi.json
      MCP         {base}/mcp   (header X-Agent-Id; stdio: cortexctl mcp --server {base}
                  --agent-id dev:alice; docs/mcp.md)
      metrics     {base}/metrics
      database    {dsn}   (PostgreSQL 17 + Apache AGE)
      logs        {workdir}

    Try:
      # store a memory
      curl -s {agent} -d '{memory}' {base}/v1/memories
      # recall it from a child namespace (parents are searched too, nearer ranks higher)
      curl -s {agent} -d '{{"query":"friday deploy","namespace":"org/team/web"}}' {base}/v1/recall
      # what the server really has live
      curl -s -H 'X-Agent-Id: dev:alice' {base}/v1/capabilities
    """)


def main() -> int:
    """Start everything, print the walkthrough, wait for Ctrl-C, stop everything."""
    interrupted = threading.Event()
    # Handlers, not a blocked signal mask: children inherit a mask, and a server that
    # cannot receive SIGTERM would outlive `make serve`.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: interrupted.set())
    workdir = Path(tempfile.mkdtemp(prefix="cortex-run-"))
    os.chmod(workdir, 0o755)  # noqa: S103 - the database user must traverse it; no secrets
    server = None
    process: subprocess.Popen[bytes] | None = None
    try:
        print("starting PostgreSQL 17 + Apache AGE ...", flush=True)
        server = start_pg_age(workdir / "pg")
        dsn = server.dsn("postgres")
        report = asyncio.run(migrate(dsn))
        print(f"schema version {report.after}" + (" (AGE graph ready)" if report.graph else ""))
        port = pick_port(8080)
        base = f"http://127.0.0.1:{port}"
        with (workdir / "server.log").open("wb") as log:
            process = subprocess.Popen(
                [*CORTEXCTL, "serve", "--database-url", dsn, "--listen", f"127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        wait_until_up(f"{base}/readyz", process)
        print(walkthrough(base, dsn, workdir), flush=True)
        while not interrupted.wait(0.5) and process.poll() is None:
            pass  # woken by Ctrl-C / SIGTERM, or the server exited
    except KeyboardInterrupt:
        pass
    finally:
        print("\nstopping ...", flush=True)
        if process is not None:
            stop(process)
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
