"""Runs the kopf operator with a health endpoint and metrics: ``cortexctl operator``.

One replica, standalone (no kopf peering: see docs/adr/0002-operator-replicas-and-failover.md).
``/healthz`` answers while the process serves; ``/readyz`` once kopf has started and its
start-up handlers (API credentials, CRD checks) have run. SIGTERM stops kopf cleanly.
The watches and reconcilers live in :mod:`.registry`; this module only runs them.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass

import kopf
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from attested_cortex import tasks
from attested_cortex.controller.metrics import METRICS, READY
from attested_cortex.controller.registry import REGISTRY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorSettings:
    """Where to watch and where to answer probes and scrapes."""

    namespaces: tuple[str, ...]
    clusterwide: bool
    health: tuple[str, int]
    metrics: tuple[str, int]


def _health_app(ready: asyncio.Event) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        ok = ready.is_set()
        return web.json_response({"status": "ready" if ok else "starting"},
                                 status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def _metrics_app(registry: CollectorRegistry) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": "text/plain; version=0.0.4"})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def _serve(app: web.Application, address: tuple[str, int]) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, address[0], address[1]).start()
    return runner


async def run_operator(settings: OperatorSettings) -> None:
    """Run until SIGINT/SIGTERM."""
    ready, stop = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runners = [await _serve(_health_app(ready), settings.health),
               await _serve(_metrics_app(METRICS), settings.metrics)]
    try:
        operator = asyncio.create_task(kopf.operator(
            registry=REGISTRY, standalone=True,
            memo=kopf.Memo(clusterwide=settings.clusterwide, namespaces=settings.namespaces),
            clusterwide=settings.clusterwide,
            namespaces=settings.namespaces, ready_flag=ready, stop_flag=stop,
        ))
        # Either kopf becomes ready or it ends first (a failed start-up): never wait for a
        # flag that an ended operator can no longer set.
        flag = asyncio.create_task(ready.wait(), name="operator-ready")
        await asyncio.wait({flag, operator}, return_when=asyncio.FIRST_COMPLETED)
        if ready.is_set():
            READY.set(1)
            log.info("operator ready", extra={"namespaces": list(settings.namespaces),
                                              "clusterwide": settings.clusterwide})
        await tasks.stop((flag,))
        await operator
    finally:
        for runner in runners:
            await runner.cleanup()
