"""A loopback TCP proxy that can be cut and healed: a network partition for tests and bench.

``cortexctl serve`` processes reach each other through one proxy per direction; cutting a
proxy closes its listener and every connection through it (the peer sees "connection
refused", as for a host that is gone), healing listens again on the same port. The proxy
runs its own event loop in a thread, so synchronous fixtures and async tests both use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from hack.support.served import free_port

T = TypeVar("T")
_CHUNK = 65536


class TcpProxy:
    """``127.0.0.1:port`` forwarded to ``127.0.0.1:target`` (set before the first use)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.target: int | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"tcpproxy-{self.port}")
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread.start()
        self.heal()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def heal(self) -> None:
        """Listen (again) on the port."""
        self._run(self._listen())

    def cut(self) -> None:
        """Stop listening and drop every connection through the proxy."""
        self._run(self._cut())

    def close(self) -> None:
        """Cut and stop the thread."""
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port,
                                                      reuse_address=True)

    async def _cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if server is not None:
            await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.target is None or self._server is None:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(_CHUNK):
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
