"""Exec transport: one subprocess per fire, JSON request on stdin, one JSON answer on stdout.

Built by the pipeline (:mod:`attested_cortex.hooks.pipeline`) for ``mode: exec`` hooks.
The child runs in its own session, so at its deadline (or when its output passes the cap)
the whole process group is SIGKILLed, grandchildren included. A non-zero exit is a
``crash``; no output ``empty``; non-JSON ``malformed``; too much output ``oversized``.
The hook's stderr goes to the server's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping

from attested_cortex.hooks.wire import (
    MODE_ENV,
    HookFailure,
    RawHookRequest,
    TransportState,
    decode_answer,
)

_CHUNK = 65536


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
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                env=self._env, start_new_session=True,
            )
        except OSError as exc:
            raise HookFailure("crash", f"cannot start {self._command[0]!r}: {exc}") from exc
        try:
            async with asyncio.timeout(timeout_s):
                return await self._exchange(proc, data)
        except TimeoutError as exc:
            raise HookFailure("timeout", f"no answer within {timeout_s * 1000:.0f} ms") from exc
        finally:
            await _kill_group(proc)

    async def _exchange(self, proc: asyncio.subprocess.Process, data: bytes) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(ConnectionError):
            proc.stdin.write(data)
            await proc.stdin.drain()
            proc.stdin.close()
        output = await _read_capped(proc.stdout, self._max_output)
        code = await proc.wait()
        if code != 0:
            raise HookFailure("crash", f"the hook exited with status {code}")
        return output

    def state(self) -> TransportState:
        """Exec hooks are always ready; ``last_error`` is the latest failure."""
        return {"state": "ready", "restarts": 0, "pid": None, "last_error": self._last_error}

    async def aclose(self) -> None:
        """Nothing long-lived to stop."""


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > cap:
            raise HookFailure("oversized", f"the hook printed more than {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the child's whole process group (it leads its own session), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
