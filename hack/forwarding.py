"""A port-forward that survives pod churn: ``make run``'s API URL (called by hack/run.py).

``kubectl port-forward svc/NAME`` binds to one pod of the Service; when that pod is deleted
or replaced by a rollout (a HookChain or config change rolls the server) the command exits.
``make run`` used to treat that as the end of the walkthrough and stop the node with
everything on it two seconds after a ``kubectl delete pod``. :class:`Forward` picks the
local port once and restarts the command on that same port whenever it exits, with a short
capped backoff, until :meth:`Forward.stop`; a forward that keeps failing only says so in its
log (the URL printed to the user stays the same). Nothing here can stop the cluster.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

#: Waits between restarts: short at first (a new pod is usually ready within seconds).
FIRST_BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 5.0
#: A forward that ran this long was healthy: the next failure starts the backoff again.
HEALTHY_AFTER_S: Final = 10.0

CommandFn = Callable[[int], list[str]]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Forward:
    """``command(port)`` kept running on one local port, restarted whenever it exits."""

    def __init__(self, command: CommandFn, *, log: Path, env: Mapping[str, str] | None = None,
                 port: int | None = None) -> None:
        self.port = port or free_port()
        self.restarts = 0
        self._command, self._log, self._env = command, log, dict(env) if env else None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._supervise, name="port-forward",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Forward:
        """Start the command and its supervisor; returns self."""
        self._spawn()
        self._thread.start()
        return self

    def pid(self) -> int | None:
        """The current process's id (it changes on every restart)."""
        with self._lock:
            return self._process.pid if self._process is not None else None

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        with self._lock, self._log.open("ab") as sink:
            if self._stopping.is_set():  # stop() ran meanwhile: start nothing it cannot end
                return None
            self._process = subprocess.Popen(
                self._command(self.port), stdin=subprocess.DEVNULL, stdout=sink,
                stderr=subprocess.STDOUT, env=self._env)
            return self._process

    def _note(self, line: str) -> None:
        with self._log.open("a") as sink:
            sink.write(f"[make run] {line}\n")

    def _supervise(self) -> None:
        backoff = FIRST_BACKOFF_S
        process = self._process
        while process is not None and not self._stopping.is_set():
            began = time.monotonic()
            code = process.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - began >= HEALTHY_AFTER_S:
                backoff = FIRST_BACKOFF_S
            self._note(f"port-forward exited ({code}); restarting on port {self.port} "
                       f"in {backoff:.1f}s")
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            self.restarts += 1
            process = self._spawn()

    def supervising(self) -> bool:
        """Whether the supervisor still watches (and would restart) the command."""
        return self._thread.is_alive()

    def wait_listening(self, timeout: float) -> bool:
        """Whether the local port accepts a connection within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.1)  # the interval of a bounded poll
        return False

    def stop(self, timeout: float = 30) -> None:
        """Stop restarting and end the current process."""
        self._stopping.set()
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)
