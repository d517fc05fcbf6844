"""``cortexctl hookd``: serves a stdio hook program to remote pipelines over TCP or UDS.

Called by :mod:`attested_cortex.cli.hookd`. The program runs as one supervised daemon
(:class:`~attested_cortex.hooks.transports.daemon.DaemonTransport`: restarted with backoff
after a crash); every connection speaks the same newline-delimited JSON-RPC 2.0 as the
daemon transport, and each request is forwarded within its own ``deadline_ms``. A hook
failure becomes a JSON-RPC error whose ``data.cause`` the remote transport maps back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Final

from attested_cortex import tasks
from attested_cortex.hooks.addresses import TcpAddress, parse_address
from attested_cortex.hooks.settings import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_OUTPUT_BYTES
from attested_cortex.hooks.transports.daemon import DaemonTransport
from attested_cortex.hooks.wire import HookFailure, RawHookRequest

logger = logging.getLogger(__name__)

#: Used when a request carries no ``deadline_ms``.
_DEFAULT_DEADLINE_MS: Final = 5000
_INVALID_REQUEST: Final = -32600
_HOOK_FAILED: Final = -32000


class Sidecar:
    """A listening socket in front of one daemon hook program."""

    def __init__(self, command: tuple[str, ...], *, listen: str,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self._address = parse_address(listen)
        self._daemon = DaemonTransport(
            command, name="hookd", max_in_flight=max_in_flight,
            max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES, env={},
        )
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start the program and begin listening."""
        await self._daemon.start()
        address, limit = self._address, DEFAULT_MAX_OUTPUT_BYTES
        if isinstance(address, TcpAddress):
            self._server = await asyncio.start_server(
                self._serve, address.host, address.port, limit=limit
            )
        else:
            self._server = await asyncio.start_unix_server(self._serve, address.path, limit=limit)
        logger.info("hookd listening on %s", address)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ValueError):
            while line := await reader.readline():
                task = asyncio.create_task(self._answer(line, writer))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        writer.close()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        reply = await self.handle(line)
        if not writer.is_closing():
            writer.write(json.dumps(reply).encode() + b"\n")

    async def handle(self, line: bytes) -> dict[str, Any]:
        """Answer one JSON-RPC request line."""
        try:
            message = json.loads(line)
            call_id, params = message["id"], message["params"]
            timeout_s = int(params.get("deadline_ms", _DEFAULT_DEADLINE_MS)) / 1000
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            # OverflowError: deadline_ms 1e400 (infinite); it went unanswered, the task's
            # exception unretrieved, and the caller waited out its own budget
            return _error(None, _INVALID_REQUEST, "not a JSON-RPC hook.fire request", None)
        try:
            request: RawHookRequest = params
            result = await self._daemon.call(request, timeout_s=timeout_s)
        except HookFailure as failure:
            return _error(call_id, _HOOK_FAILED, failure.detail, failure.cause)
        return {"jsonrpc": "2.0", "id": call_id, "result": result}

    async def aclose(self) -> None:
        """Stop listening and stop the program."""
        if self._server is not None:
            self._server.close()
        await tasks.stop(list(self._tasks))
        await self._daemon.aclose()


def _error(call_id: object, code: int, message: str, cause: str | None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if cause is not None:
        error["data"] = {"cause": cause}
    return {"jsonrpc": "2.0", "id": call_id, "error": error}


async def serve_forever(sidecar: Sidecar, stop: asyncio.Event) -> None:
    """Run ``sidecar`` until ``stop`` is set."""
    await sidecar.start()
    try:
        await stop.wait()
    finally:
        await sidecar.aclose()
