"""A TCP address in front of PostgreSQL whose target can move: what a Kubernetes Service is to
the pods behind it during a failover (the endpoint of the read-write Service changes from the
old primary to the promoted one; connections to the old one are gone).

Not a fake of PostgreSQL: bytes pass through unchanged to a real server. Callers: the
failover tests (tests/server/test_failover.py). Besides :meth:`Forwarder.switch`, it can lose
one acknowledgement (:meth:`Forwarder.lose_next_commit_ack`): the next client message holding
``COMMIT`` reaches the server, the server's answer is read and dropped, and the client's
connection is cut, so the client cannot know that its transaction committed.
"""

from __future__ import annotations

import asyncio
import contextlib

HOST = "127.0.0.1"
_CHUNK = 65536


class Forwarder:
    """Listens on 127.0.0.1 and forwards each connection to the current target port."""

    def __init__(self, target: int | None) -> None:
        self.target = target
        self.lost_acks = 0
        self._lose_ack = False
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> Forwarder:
        self._server = await asyncio.start_server(self._accept, HOST, 0)
        return self

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def switch(self, target: int | None) -> None:
        """New connections go to ``target`` (None: refused); open ones are cut, as when the
        pod behind the Service is gone."""
        self.target = target
        self.cut()

    def cut(self) -> None:
        """Close every open connection (both sides)."""
        for client, server in list(self._pairs):
            client.close()
            server.close()
        self._pairs.clear()

    def lose_next_commit_ack(self) -> None:
        """Arm: the next COMMIT is delivered and its answer is never returned."""
        self._lose_ack = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.target is None:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(HOST, self.target)
        except OSError:
            writer.close()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._upstream(reader, up_writer, writer),
                                 self._downstream(up_reader, writer, up_writer))
        finally:
            self._pairs.discard(pair)
            writer.close()
            up_writer.close()

    async def _upstream(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter,
                        client: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(_CHUNK):
                if self._lose_ack and b"COMMIT" in data:
                    self._lose_ack = False
                    self.lost_acks += 1
                    client.transport.abort()  # the client hears nothing more ...
                    up.write(data)  # ... and the server gets its COMMIT
                    await up.drain()
                    return  # _downstream reads the answer, then cuts the server side
                up.write(data)
                await up.drain()
        up.close()

    async def _downstream(self, reader: asyncio.StreamReader, client: asyncio.StreamWriter,
                          up: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(_CHUNK):
                if client.is_closing():  # an answer nobody will hear: the COMMIT was done
                    break
                client.write(data)
                await client.drain()
        client.close()
        up.close()
