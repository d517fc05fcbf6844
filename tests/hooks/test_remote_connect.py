"""A remote hook whose address takes connections but never accepts them (a full accept
queue, like an address that drops packets) is reported down with the reason after the
connect timeout, and calls fail fast by the fail mode instead of waiting out their budget."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hack.support.waiting import await_until

from attested_cortex.hooks.transports.remote import RemoteTransport
from attested_cortex.hooks.wire import HookFailure


@pytest.fixture
def unaccepting() -> Iterator[int]:
    """A TCP port whose one-slot accept queue is already full: a connect gets no answer."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(4):  # the kernel admits backlog + 1; the rest wait for a SYN-ACK
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for s in (*fillers, server):
        s.close()


async def test_a_connect_that_gets_no_answer_is_down_after_the_timeout(
        unaccepting: int) -> None:
    transport = RemoteTransport(f"tcp://127.0.0.1:{unaccepting}", name="silent",
                                max_in_flight=4, max_output_bytes=65536)
    transport.connect_timeout_s = 0.5
    await transport.start()
    try:
        await await_until(lambda: transport.state()["last_error"] is not None, seconds=10)
        assert "no answer within 0.5 s" in str(transport.state()["last_error"])
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(HookFailure):
            await transport.call(cast(Any, {"event": "pre_store"}), timeout_s=3.0)
        assert loop.time() - started < 1.0  # down: the fail mode applies at once
    finally:
        await transport.aclose()
