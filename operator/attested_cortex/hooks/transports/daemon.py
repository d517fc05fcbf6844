"""Daemon transport: a long-lived child speaking newline-delimited JSON-RPC 2.0 on stdio.

Built by the pipeline for ``mode: daemon`` hooks and by ``cortexctl hookd`` for the program
it serves. The child starts with the pipeline, leads its own process group, is restarted
with exponential backoff after it exits (:mod:`attested_cortex.hooks.supervising`) and is
killed with its whole process group on close. Its stderr goes to the server's stderr.

The child stays in the server's session (``process_group=0``, not a new session): Linux puts
each session in a scheduling group of its own (autogroup), and a hook in another group waited
for the CPU longer each time the server woke it. On this 2-core machine under load 16, the
round trip over the same pipes was 0.94-3.05 ms p95 and 0.27-0.49 ms mean in the server's
session against 3.60-4.46 and 0.55-1.05 ms in a session of its own (docs/adr/0044).
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
from attested_cortex.hooks.wire import MODE_ENV, HookFailure

#: How long a child may take to exit after its stdin closes before it is killed.
_GRACE_S = 0.5


class _ChildProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol for a child, plus a future set when the child exits."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class _ChildLink:
    def __init__(
        self, transport: asyncio.SubprocessTransport, protocol: _ChildProtocol, *,
        max_in_flight: int,
    ) -> None:
        proc = asyncio.subprocess.Process(transport, protocol, asyncio.get_running_loop())
        assert proc.stdout is not None and proc.stdin is not None
        self._transport = transport
        self._exited = protocol.exited
        self.pid: int | None = proc.pid
        self.connection = RpcConnection(proc.stdout, proc.stdin, max_in_flight=max_in_flight)
        self._exited.add_done_callback(self._on_exit)

    def _on_exit(self, _: object) -> None:
        # Normally stdout closes with the exit; a grandchild may hold it open forever.
        asyncio.get_running_loop().call_later(_GRACE_S, self._drop_stdout)

    def _drop_stdout(self) -> None:
        stdout = self._transport.get_pipe_transport(1)
        if stdout is not None and not stdout.is_closing():
            stdout.close()  # the reader sees EOF: run() ends and pending calls fail crash

    async def close(self) -> None:
        # Each step in a ``finally``: a shutdown cancels the supervisor, and again after
        # half a second (attested_cortex.tasks.stop), which used to land in the grace wait
        # and skip the kill, so a daemon that ignored its closed stdin outlived the server.
        try:
            await self.connection.aclose()
            await asyncio.wait([self._exited], timeout=_GRACE_S)
        finally:
            if not self._exited.done():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._transport.get_pid(), signal.SIGKILL)
            try:
                await asyncio.wait([self._exited], timeout=_GRACE_S)
            finally:
                # Our ends of the pipes close here, whoever else still holds theirs; a child
                # not reaped yet (only a stuck kernel keeps one past SIGKILL) is left to the
                # child watcher.
                self._transport.close()


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
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _ChildProtocol(self._limit, loop), *self._command,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
                env=self._env, process_group=0,
            )
        except ValueError as exc:  # an argument the OS cannot take: down, and said why
            raise HookFailure("crash", f"cannot start {self._command[0]!r}: {exc}") from exc
        return _ChildLink(transport, protocol, max_in_flight=self._max_in_flight)

