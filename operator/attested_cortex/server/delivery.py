"""The delivery process: webhook delivery in a process of its own (ADR 0142).

Started and supervised by the server (:mod:`.delivery_process`) as
``python -m attested_cortex.server.delivery --parent <pid> --fd <n>``; never by hand. Every
delivery is an HTTP request that costs the serving process about 0.38 ms of CPU (ADR 0128),
so in the server's own event loop ten subscriptions took four times a store's CPU from the
write path. Here the same :class:`~attested_cortex.service.workers.delivering.Deliverer`
runs in a child at a lower CPU priority (``subscriptions.delivery_nice``): on a busy machine
the write path gets the CPU first, and delivery takes what is left (its batches grow, so each
event costs it less).

It watches a master key ring directory itself, as a replica does (the same checks against
the recorded key versions), so a rotation is adopted here at this process's own poll.

The child is the server's: it dies with it (``PR_SET_PDEATHSIG``: SIGKILL when the server
dies, even by SIGKILL; and it stops when the control socket reaches its end), and its
leases (ADR 0131) die with its database session, so a replica's child never outlives it.
Over the control socket (JSON lines, a socketpair the server made) it reads the server's
settings first, then ``changed`` / ``kick`` (a subscription was changed or replayed on this
server: resync now) and ``metrics`` (its registry as Prometheus text, which the server's
``/metrics`` appends); it tells the server ``ready`` and every change of the leases it holds
(the API's ``running``: this replica delivers that subscription). Nothing secret crosses it
but the settings, which are the server's own (the database URL included): never argv or the
environment, which other users of the node may read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any, Final

from prometheus_client import CollectorRegistry, generate_latest

from attested_cortex.attest.ringwatch import RingSource
from attested_cortex.server.configuring import key_ring_from, sealer_from
from attested_cortex.server.logs import setup_logging
from attested_cortex.server.settings import ServerSettings
from attested_cortex.server.subscribing import delivery_settings
from attested_cortex.service.workers.delivering import Deliverer
from attested_cortex.service.workers.ringreloading import RingReloader
from attested_cortex.store.database import Database

log = logging.getLogger(__name__)

#: The longest control message (a metrics exposition of many subscriptions).
LINE_LIMIT: Final = 16 * 1024 * 1024
#: The child's own pool: its lanes share reads and cursor writes (ADR 0128), so a few
#: connections serve a hundred subscriptions; the server's pool stays the requests'.
POOL_MAX: Final = 4
_PR_SET_PDEATHSIG: Final = 1


def die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when the server dies (Linux), and exit now if
    it already has (it died between the fork and this call: the parent is no longer it)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("delivery process: prctl failed (errno %d); it stops when the "
                        "server's socket closes", ctypes.get_errno())
    if os.getppid() != parent:
        os._exit(0)


class Channel:
    """The child's end of the control socket: one JSON object a line."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def send(self, message: dict[str, Any]) -> None:
        if not self._writer.is_closing():
            self._writer.write(json.dumps(message).encode() + b"\n")


async def commands(reader: asyncio.StreamReader, deliverer: Deliverer,
                   registry: CollectorRegistry, channel: Channel) -> None:
    """Serve the server's requests until the socket ends (the server stopped or died)."""
    while line := await reader.readline():
        message = json.loads(line)
        op = message.get("op")
        if op == "changed":
            deliverer.changed()
        elif op == "kick":
            deliverer.kick()
        elif op == "metrics":
            channel.send({"id": message["id"],
                          "metrics": generate_latest(registry).decode()})


async def run(fd: int) -> None:
    """Read the settings from the socket, deliver until told to stop."""
    reader, writer = await asyncio.open_unix_connection(sock=socket.socket(fileno=fd),
                                                        limit=LINE_LIMIT)
    first = json.loads(await reader.readline())
    settings = ServerSettings.model_validate(first["settings"])
    setup_logging(settings.log_level)
    os.nice(settings.subscriptions.delivery_nice)
    ring = await asyncio.to_thread(key_ring_from, settings)  # Argon2id may run
    sealer = sealer_from(settings, ring, bool(first.get("at_rest_default")))
    source = RingSource(ring, settings.master_key.dir) \
        if ring is not None and settings.master_key is not None else None
    if source is not None and sealer is not None:
        source.listen(sealer.rekey)  # a rotated ring opens the events sealed under it
    registry = CollectorRegistry()
    channel = Channel(writer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as stack:
        db = await Database.open(
            settings.database_url, min_size=1,
            max_size=min(POOL_MAX, settings.pool_max_size),
            lock_timeout_s=settings.db_lock_timeout_ms / 1000,
            statement_timeout_s=settings.db_statement_timeout_ms / 1000)
        stack.push_async_callback(db.close)
        if source is not None and source.watching and settings.master_key is not None:
            # like any replica: the same checks against the recorded key versions
            reloader = RingReloader(source, db=db,
                                    interval_s=settings.master_key.reload_interval_ms / 1000)
            reloader.start()
            stack.push_async_callback(reloader.aclose)
        deliverer = Deliverer(db, delivery_settings(settings), registry=registry,
                              sealer=sealer)
        deliverer.leases.on_change = lambda held: channel.send(
            {"held": sorted(str(h) for h in held)})
        deliverer.start(settings.database_url)
        stack.push_async_callback(deliverer.aclose)
        channel.send({"ready": True, "pid": os.getpid()})
        log.info("delivery process running", extra={"nice": os.nice(0)})
        serving = asyncio.create_task(commands(reader, deliverer, registry, channel))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait((serving, stopping), return_when=asyncio.FIRST_COMPLETED)
        for task in (serving, stopping):
            task.cancel()
        await asyncio.gather(serving, stopping, return_exceptions=True)
        log.info("delivery process stopping")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attested_cortex.server.delivery",
                                     description="the server's delivery process (ADR 0142)")
    parser.add_argument("--parent", type=int, required=True, help="the server's pid")
    parser.add_argument("--fd", type=int, required=True, help="the control socket")
    args = parser.parse_args(argv)
    die_with(args.parent)
    asyncio.run(run(args.fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
