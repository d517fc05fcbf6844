"""Assembles the aiohttp application from the service set; called by ``cortexctl serve``
and by the tests (which serve it on a real loopback port).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from aiohttp import web

from attested_cortex.mcp.serving import McpEndpoint
from attested_cortex.server import errors, mcp_endpoint, middleware, openapi
from attested_cortex.server.auth import Authenticator
from attested_cortex.server.metrics import HttpMetrics
from attested_cortex.server.routes import (
    approvals,
    audit,
    exporting,
    federation,
    graph,
    memories,
    recall,
    spoke,
    subscriptions,
    system,
    transcripts,
)
from attested_cortex.server.state import STATE_KEY, AppState
from attested_cortex.service.pipeline.context import Services

ROUTE_MODULES: tuple[ModuleType, ...] = (system, memories, recall, graph, audit, approvals,
                                         transcripts, exporting, spoke, federation,
                                         subscriptions)
OPENAPI_KEY = web.AppKey("cortex_openapi", dict)


def build_app(
    services: Services, *, auth: Authenticator, metrics: HttpMetrics | None = None,
    route_modules: Sequence[ModuleType] = ROUTE_MODULES, mcp: bool = True,
    federated: federation.Served | None = None,
) -> web.Application:
    """The application: middleware, routes, the MCP endpoint and the OpenAPI document.

    ``federated``: the federation this server runs (issue 42), if any.
    With ``mcp``, the application holds the endpoint's ``services`` (``services`` plus the
    endpoint's self-description, which capabilities report) rather than ``services``.
    """
    endpoint = McpEndpoint(services) if mcp else None
    if endpoint is not None:
        services = endpoint.services
    app = web.Application(
        middlewares=[middleware.context_middleware, errors.error_middleware,
                     middleware.auth_middleware],
        client_max_size=services.limits.max_body_bytes,
    )
    if federated is not None:
        app[federation.FEDERATION_KEY] = federated
    app[STATE_KEY] = AppState(
        services, auth, metrics or HttpMetrics.create(services.metrics_registry)
    )
    operations: list[openapi.Operation] = [
        openapi.Operation("GET", "/v1/openapi.json", "This document", 200, None, public=True,
                          errors=()),
    ]
    for module in route_modules:
        app.router.add_routes(module.routes)
        operations.extend(module.operations)
    if endpoint is not None:
        operations.extend(mcp_endpoint.operations)
    app[OPENAPI_KEY] = openapi.build(operations)
    if endpoint is not None:
        mcp_endpoint.mount(app, endpoint)
    app.on_shutdown.append(_end_streams)
    app.router.add_get("/v1/openapi.json", _openapi)
    return app


async def _end_streams(app: web.Application) -> None:
    """Shutdown: end the approval event streams instead of waiting out their keep-alive."""
    approvals = app[STATE_KEY].services.approvals
    if approvals is not None:
        approvals.close_streams()


async def _openapi(request: web.Request) -> web.Response:
    document: dict[str, Any] = request.app[OPENAPI_KEY]
    return web.json_response(document)
