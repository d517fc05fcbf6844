"""Exec transport: one subprocess per fire, JSON request on stdin, one JSON answer on stdout.

Built by the pipeline (:mod:`attested_cortex.hooks.dispatching`) for ``mode: exec`` hooks.
The child runs in its own session, so when the call ends for any reason (answer, deadline,
output past the cap, crash) the whole process group is SIGKILLed, grandchildren included.
A non-zero exit is a ``crash``; no output ``empty``; non-JSON ``malformed``; too much
output ``oversized``. The hook's stderr goes to the server's stderr.

Every step, spawning, answering, killing and reaping, sits inside the caller's budget: the
answer must come by ``budget - reserve`` and the rest is for the kill. The pipes are read by a
protocol that never stops reading (output past the cap is dropped, not buffered), and they are
closed by us rather than waited for, so neither a flood of output nor a grandchild that keeps
stdout open can hold a call (asyncio's ``Process.wait`` waits for the pipes to close, which
is what made over-cap calls hang). A child still unreaped at the deadline is left to the
event loop's child watcher; its pipes are already closed, so no descriptor stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping
from typing import cast

from attested_cortex.hooks.wire import (
    MODE_ENV,
    HookFailure,
    RawHookRequest,
    TransportState,
    decode_answer,
)

#: Part of each budget kept for killing and reaping the child (at most a fifth of it).
REAP_RESERVE_S = 0.1


class ExecTransport:
    """Spawns ``command`` for every call."""

    def __init__(
        self, command: tuple[str, ...], *, max_output_bytes: int, env: Mapping[str, str]
    ) -> None:
        self._command = command
        self._max_output = max_output_bytes
        self._env = {**os.environ, **env, MODE_ENV: "exec"}
        self._last_error: str | None = None

    async def start(self) -> None:
        """Nothing to start: each call spawns its own process."""

    async def wait_settled(self, timeout_s: float) -> None:
        """Always settled."""

    async def call(self, request: RawHookRequest, *, timeout_s: float) -> object:
        """Run the command once; raise :class:`HookFailure` when it gives no usable answer."""
        try:
            data = json.dumps(request, default=str).encode()
            return decode_answer(await self._run(data, timeout_s))
        except HookFailure as failure:
            self._last_error = str(failure)
            raise

    async def _run(self, data: bytes, timeout_s: float) -> bytes:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        answer_by = deadline - min(REAP_RESERVE_S, timeout_s / 5)
        child = _Child(self._max_output)
        try:
            async with asyncio.timeout_at(answer_by):
                transport, _ = await loop.subprocess_exec(
                    lambda: child, *self._command, stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, stderr=None, env=self._env,
                    start_new_session=True,
                )
        except (OSError, ValueError) as exc:  # ValueError: an argument the OS cannot take
            raise HookFailure("crash", f"cannot start {self._command[0]!r}: {exc}") from exc
        except TimeoutError as exc:
            raise HookFailure("timeout", "the hook did not start within its budget") from exc
        try:
            async with asyncio.timeout_at(answer_by):
                return await child.exchange(transport, data)
        except TimeoutError as exc:
            raise HookFailure("timeout", f"no answer within {timeout_s * 1000:.0f} ms") from exc
        finally:
            await _stop(transport, child, deadline)

    def state(self) -> TransportState:
        """Exec hooks are always ready; ``last_error`` is the latest failure."""
        return {"state": "ready", "restarts": 0, "pid": None, "last_error": self._last_error}

    async def aclose(self) -> None:
        """Nothing long-lived to stop."""


class _Child(asyncio.SubprocessProtocol):
    """Collects stdout up to the cap and signals EOF, exit and the transport's end."""

    def __init__(self, cap: int) -> None:
        loop = asyncio.get_running_loop()
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflow: HookFailure | None = None
        self.output_done: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()

    async def exchange(self, transport: asyncio.SubprocessTransport, data: bytes) -> bytes:
        """Send ``data``, wait for stdout to end (or overflow) and the exit; the output."""
        # Whatever the loop's class for it (uvloop's is no asyncio.WriteTransport: an isinstance
        # check failed every exec hook while serve ran on uvloop, docs/adr/0075).
        stdin = cast("asyncio.WriteTransport | None", transport.get_pipe_transport(0))
        if stdin is None:
            raise HookFailure("crash", "the hook's stdin is not open")
        stdin.write(data)  # buffered by the transport; a child that never reads is fine
        stdin.close()  # EOF once flushed
        await self.output_done
        if self.overflow is not None:
            raise self.overflow
        await self.exited
        code = transport.get_returncode()
        if code != 0:
            raise HookFailure("crash", f"the hook exited with status {code}")
        return b"".join(self._chunks)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if self.output_done.done():
            return  # past the cap: keep reading so the child never blocks, drop the bytes
        self._size += len(data)
        if self._size > self._cap:
            self.overflow = HookFailure(
                "oversized", f"the hook printed more than {self._cap} bytes")
            self._chunks.clear()
            _settle(self.output_done)
            return
        self._chunks.append(bytes(data) if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            _settle(self.output_done)

    def process_exited(self) -> None:
        _settle(self.exited)

    def connection_lost(self, exc: Exception | None) -> None:
        _settle(self.output_done)
        _settle(self.exited)
        _settle(self.finished)


async def _stop(transport: asyncio.SubprocessTransport, child: _Child, deadline: float) -> None:
    """SIGKILL the child's process group, close our pipe ends, wait for the reap until
    ``deadline`` (never past it), then release the transport.

    The transport itself is closed last: closing it while the child is unreaped makes
    asyncio poll (and so reap) the child behind its child watcher's back.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(transport.get_pid(), signal.SIGKILL)
    for fd in (0, 1):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()
    left_s = deadline - asyncio.get_running_loop().time()
    if left_s > 0 and not child.finished.done():
        await asyncio.wait([child.finished], timeout=left_s)
    transport.close()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
