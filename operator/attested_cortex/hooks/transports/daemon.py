"""Daemon transport: a long-lived child speaking newline-delimited JSON-RPC 2.0 on stdio.

Built by the pipeline for ``mode: daemon`` hooks and by ``cortexctl hookd`` for the program
it serves. The child starts with the pipeline, runs in its own session, is restarted with
exponential backoff after it exits (:mod:`attested_cortex.hooks.supervising`) and is killed
with its whole process group on close. Its stderr goes to the server's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping

from attested_cortex.hooks.rpc import RpcConnection
from attested_cortex.hooks.supervising import (
    DEFAULT_BACKOFF,
    Backoff,
    SupervisedTransport,
    Supervisor,
)
from attested_cortex.hooks.wire import MODE_ENV

#: How long a child may take to exit after its stdin closes before it is killed.
_GRACE_S = 0.5


class _ChildLink:
    def __init__(self, proc: asyncio.subprocess.Process, *, max_in_flight: int) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        self.proc = proc
        self.pid: int | None = proc.pid
        self.connection = RpcConnection(proc.stdout, proc.stdin, max_in_flight=max_in_flight)

    async def close(self) -> None:
        await self.connection.aclose()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_GRACE_S):
                await self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


class DaemonTransport(SupervisedTransport):
    """Runs ``command`` once and multiplexes every call over its stdin/stdout."""

    def __init__(
        self, command: tuple[str, ...], *, name: str, max_in_flight: int,
        max_output_bytes: int, env: Mapping[str, str], backoff: Backoff = DEFAULT_BACKOFF,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._command = command
        self._max_in_flight = max_in_flight
        self._limit = max_output_bytes
        self._env = {**os.environ, **env, MODE_ENV: "daemon"}
        self._supervisor = Supervisor(
            self._spawn, name=name, backoff=backoff, on_restart=on_restart
        )

    async def _spawn(self) -> _ChildLink:
        proc = await asyncio.create_subprocess_exec(
            *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=self._env, start_new_session=True, limit=self._limit,
        )
        return _ChildLink(proc, max_in_flight=self._max_in_flight)

