"""Remote transport: the daemon JSON-RPC protocol over TCP or a Unix socket.

Built by the pipeline for ``mode: remote`` hooks, typically a sidecar container running
``cortexctl hookd --listen ADDR -- CMD...``. Reconnects with exponential backoff
(:mod:`attested_cortex.hooks.supervising`) whenever the connection drops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from attested_cortex.hooks.addresses import TcpAddress, parse_address
from attested_cortex.hooks.rpc import RpcConnection
from attested_cortex.hooks.supervising import (
    DEFAULT_BACKOFF,
    Backoff,
    SupervisedTransport,
    Supervisor,
)

#: A connect that gets no answer (an address that drops packets, a full accept queue) fails
#: after this long, so the hook is reported down and retried with backoff instead of
#: staying "starting" while every call waits out its budget.
CONNECT_TIMEOUT_S: Final = 5.0


class _SocketLink:
    pid: int | None = None

    def __init__(self, connection: RpcConnection) -> None:
        self.connection = connection

    async def close(self) -> None:
        await self.connection.aclose()


class RemoteTransport(SupervisedTransport):
    """Connects to ``address`` and multiplexes every call over that connection."""

    def __init__(
        self, address: str, *, name: str, max_in_flight: int, max_output_bytes: int,
        backoff: Backoff = DEFAULT_BACKOFF, on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._address = parse_address(address)
        self.connect_timeout_s = CONNECT_TIMEOUT_S
        self._max_in_flight = max_in_flight
        self._limit = max_output_bytes
        self._supervisor = Supervisor(
            self._connect, name=name, backoff=backoff, on_restart=on_restart
        )

    async def _connect(self) -> _SocketLink:
        address = self._address
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if isinstance(address, TcpAddress):
                    reader, writer = await asyncio.open_connection(
                        address.host, address.port, limit=self._limit
                    )
                else:
                    reader, writer = await asyncio.open_unix_connection(address.path,
                                                                        limit=self._limit)
        except TimeoutError as exc:
            raise OSError(f"no answer within {self.connect_timeout_s:g} s") from exc
        return _SocketLink(RpcConnection(reader, writer, max_in_flight=self._max_in_flight))

