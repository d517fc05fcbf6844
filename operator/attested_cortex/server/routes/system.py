"""Liveness, readiness, metrics and capabilities."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from attested_cortex.server.openapi import Operation
from attested_cortex.server.responses import CapabilitiesOut, HealthOut
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import delivery_report, introspection

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """The process is up and serving."""
    return web.json_response({"status": "ok", "checks": {}})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """Ready when the database answers and the schema is current (503 otherwise)."""
    ok, checks = await introspection.readiness(state(request).services)
    return web.json_response(
        {"status": "ready" if ok else "not_ready", "checks": checks}, status=200 if ok else 503
    )


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus text exposition: the server's registry, then the delivery process's
    (its per-subscription series, ADR 0142; nothing when delivery runs in this process)."""
    services = state(request).services
    body = generate_latest(state(request).metrics.registry)
    if services.deliverer is not None:
        body += await services.deliverer.exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@routes.get("/v1/capabilities")
async def capabilities(request: web.Request) -> web.Response:
    """The honest live self-description."""
    return web.json_response(await introspection.describe(state(request).services,
                                                          caller(request)))


@routes.get("/v1/delivery-report")
async def delivery(request: web.Request) -> web.Response:
    """Each subscription's delivery state, secret-free (the operator's status source)."""
    return web.json_response(await delivery_report.report(state(request).services))


operations = [
    Operation("GET", "/healthz", "Liveness", 200, HealthOut, public=True, errors=()),
    Operation("GET", "/readyz", "Readiness: database reachable and schema current", 200,
              HealthOut, public=True, errors=(), extra_responses={503: "Not ready"}),
    Operation("GET", "/metrics", "Prometheus metrics (text)", 200, None, public=True, errors=()),
    Operation("GET", "/v1/capabilities", "Live capabilities", 200, CapabilitiesOut),
    Operation("GET", "/v1/delivery-report", "Subscriptions' delivery state, secret-free", 200,
              None, public=True, errors=()),
]
