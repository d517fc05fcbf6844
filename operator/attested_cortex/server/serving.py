"""The server process of ``cortexctl serve``: assemble, listen, wait for a signal.

Order: authentication from the settings (dev mode refused off loopback,
:func:`.configuring.build_auth`) -> the TLS context when ``tls`` is set (:mod:`.tls`, a bad
pair refused before anything opens) -> the services (:func:`.assembling.open_services`) ->
application -> listeners (HTTPS with the reloading context, its watcher a task of the run).
Shutdown on SIGINT/SIGTERM closes listeners, then every part in reverse order of opening.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from contextlib import AsyncExitStack

from aiohttp import web

from attested_cortex.errors import InvalidInputError
from attested_cortex.server.app import build_app
from attested_cortex.server.assembling import open_services
from attested_cortex.server.configuring import build_auth
from attested_cortex.server.connections import CortexRunner
from attested_cortex.server.federating import bundles_of, federation_from
from attested_cortex.server.federation_client import sender_from
from attested_cortex.server.routes import federation
from attested_cortex.server.settings import ServerSettings, split_listen
from attested_cortex.server.tls import ReloadingTls

log = logging.getLogger(__name__)


def freeze_startup_heap() -> None:
    """Take what start-up allocated out of the garbage collector's sight (``gc.freeze``).

    Modules, settings, the application and its routes live as long as the process; without
    this every full collection walks them again, and one landing inside a request added tens
    of milliseconds to it (measured on kg/query: docs/benchmarks/kg.json, ADR 0006).
    """
    gc.collect()
    gc.freeze()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def run_server(settings: ServerSettings, *, ready: asyncio.Event | None = None) -> None:
    """Serve until SIGINT/SIGTERM."""
    auth = build_auth(settings)
    peers = settings.federation.peers if settings.federation is not None else []
    if settings.federation is not None and settings.tls is None:
        raise InvalidInputError("federation needs tls: peers authenticate by client "
                                "certificate (mTLS)", field="federation")
    tls = (ReloadingTls(settings.tls, [p.ca_file for p in peers])
           if settings.tls is not None else None)
    async with AsyncExitStack() as stack:
        services = await open_services(settings, stack)
        federated, sending = None, None
        if settings.federation is not None:
            fed = federation_from(settings.federation, services)
            sending = sender_from(settings.federation, fed.cortex_id, services,
                                  fed.identity)
            federated = federation.Served(
                fed, bundles_of(settings.federation),
                heard_from=sending[0].heard_from if sending is not None else None)
        app = build_app(services, auth=auth, federated=federated)
        runner = CortexRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        scheme = "https" if tls is not None else "http"
        for address in settings.listen:
            host, port = split_listen(address)
            await web.TCPSite(runner, host, port, shutdown_timeout=5,
                              ssl_context=tls.context if tls is not None else None).start()
            log.info("listening", extra={"address": f"{scheme}://{address}", "auth": auth.mode})
        if tls is not None:
            stack.push_async_callback(_cancel, asyncio.create_task(tls.watch()))
        if sending is not None:  # after listening: nothing of it commits during start-up
            sender, client = sending
            stack.push_async_callback(client.aclose)
            sender.start(settings.database_url)
            stack.push_async_callback(sender.aclose)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        freeze_startup_heap()
        if ready is not None:
            ready.set()
        await stop.wait()
        log.info("shutting down")
