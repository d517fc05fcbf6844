"""A real S3-compatible object store for tests: MinIO's server as a local process.

The binary is built from MinIO's Go module by ``hack/k8s/ensure-binaries.sh minio`` (ADR
0037: unmodified, a test fixture only). :func:`start` runs it on a free loopback port over a
fresh data directory with root credentials of its own, waits until it answers, and creates
the bucket; :meth:`ObjectStore.stop` ends it. No pytest fixture here: the logical backup
tests, the physical e2e and the benches each wrap it as they need, e.g.::

    store = objectstore.start(tmp_path / "s3", bucket="backups")
    try:
        ... store.endpoint, store.access_key, store.secret_key, store.client() ...
    finally:
        store.stop()

The bucket is made and listed with the ``minio`` client library (PyPI), as any S3 client would.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from minio import Minio

from hack.k8s.localkube import binaries
from hack.support.waiting import WaitTimeout, wait_until

HOST: Final = "127.0.0.1"
#: A cold start of MinIO on a busy two-core machine takes a couple of seconds.
START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 10.0
BIND_ATTEMPTS: Final = 3


class ObjectStoreError(RuntimeError):
    """MinIO is not built, or did not start (the message carries its log's tail)."""


@dataclass
class ObjectStore:
    """A running MinIO: its S3 endpoint, root credentials, bucket and data directory."""

    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    bucket: str
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)

    @property
    def address(self) -> str:
        """``host:port`` (what the ``minio`` client takes)."""
        return self.endpoint.removeprefix("http://")

    def client(self) -> Minio:
        """An S3 client with the root credentials (plain HTTP: loopback only)."""
        return Minio(self.address, access_key=self.access_key, secret_key=self.secret_key,
                     secure=False)

    def keys(self, prefix: str = "") -> list[str]:
        """Every object name in the bucket under ``prefix``."""
        objects = self.client().list_objects(self.bucket, prefix=prefix, recursive=True)
        return sorted(str(o.object_name) for o in objects)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited in time; idempotent."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)


def binary() -> Path:
    """The built MinIO server, or an ObjectStoreError saying how to build it."""
    path = binaries.bin_dir() / "minio"
    if not path.is_file():
        raise ObjectStoreError(f"MinIO is not built ({path} is missing): run "
                               "hack/k8s/ensure-binaries.sh minio (or make node-deps)")
    return path


def start(data_dir: Path, *, bucket: str = "backups") -> ObjectStore:
    """Start MinIO over ``data_dir`` (created) with fresh root credentials and ``bucket``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = "root-" + secrets.token_hex(4), secrets.token_hex(20)
    log = data_dir.parent / f"{data_dir.name}.log"
    for _ in range(BIND_ATTEMPTS):  # a free port may be taken between our look and its bind
        port, console = _free_port(), _free_port()
        process = _spawn(data_dir, log=log, port=port, console=console,
                         credentials=(access_key, secret_key))
        if _wait_live(process, port=port):
            store = ObjectStore(endpoint=f"http://{HOST}:{port}", access_key=access_key,
                                secret_key=secret_key, bucket=bucket, data_dir=data_dir,
                                log=log, process=process)
            store.client().make_bucket(bucket)
            return store
    raise ObjectStoreError(f"MinIO did not start; its log ({log}) ends with:\n{_tail(log)}")


def _spawn(data_dir: Path, *, log: Path, port: int, console: int,
           credentials: tuple[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MINIO_ROOT_USER": credentials[0],
           "MINIO_ROOT_PASSWORD": credentials[1], "MINIO_BROWSER": "off",
           "MINIO_UPDATE": "off", "MINIO_CI_CD": "1"}
    argv = [str(binary()), "server", "--quiet", "--address", f"{HOST}:{port}",
            "--console-address", f"{HOST}:{console}", str(data_dir)]
    with log.open("ab") as out:
        # A session of its own: stop() signals its group, a Ctrl-C reaches us first.
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _wait_live(process: subprocess.Popen[bytes], *, port: int) -> bool:
    """Polls MinIO's readiness probe until it answers (True) or the process exits (False)."""
    url = f"http://{HOST}:{port}/minio/health/ready"

    def settled() -> str | None:
        with contextlib.suppress(urllib.error.URLError, OSError), \
                urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return "ready"
        return "exited" if process.poll() is not None else None

    with contextlib.suppress(WaitTimeout):
        if wait_until(settled, what=f"MinIO on port {port}", seconds=START_TIMEOUT_S,
                      interval_s=0.05) == "ready":
            return True
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
