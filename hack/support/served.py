"""``cortexctl serve`` as a real subprocess, for tests that need the whole process: the CLI,
its logs and exit codes, and synchronous clients such as schemathesis.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hack.support.waiting import wait_until

CORTEXCTL = [sys.executable, "-m", "attested_cortex"]


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_up(url: str, process: subprocess.Popen[bytes], *, seconds: float = 30,
                  tls: ssl.SSLContext | None = None) -> None:
    """Poll ``url`` until it answers; fail early if the process dies."""
    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with urllib.request.urlopen(url, timeout=1, context=tls):
            return True

    wait_until(answers, what=f"{url} to answer", seconds=seconds, ignoring=(OSError,))


def stop(process: subprocess.Popen[bytes], *, grace_s: float = 15) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within ``grace_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Served:
    """A running ``cortexctl serve``."""

    base: str
    process: subprocess.Popen[bytes]
    log: Path


@contextmanager
def serve(dsn: str, workdir: Path, *extra: str, tls: ssl.SSLContext | None = None,
          port: int | None = None) -> Iterator[Served]:
    """Run ``cortexctl serve`` on a free loopback port (or ``port``, chosen beforehand so
    peers can be configured with it) until the block ends; ``tls``: it serves HTTPS (its
    settings in ``extra``), verified with this client context."""
    port = port or free_port()
    base = f"{'https' if tls is not None else 'http'}://127.0.0.1:{port}"
    log = workdir / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*CORTEXCTL, "serve", "--database-url", dsn, "--listen", f"127.0.0.1:{port}",
             *extra],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        try:
            wait_until_up(f"{base}/healthz", process, tls=tls)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}; its log ends:\n{log.read_text()[-2000:]}") from exc
        yield Served(base, process, log)
    finally:
        stop(process)
