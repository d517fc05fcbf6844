"""Typed access to what the application holds: services, authenticator, metrics."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from attested_cortex.server.auth import Authenticator
from attested_cortex.server.metrics import HttpMetrics
from attested_cortex.service.pipeline.context import Caller, Services


@dataclass(frozen=True)
class AppState:
    """Everything a route needs, stored once on the application."""

    services: Services
    auth: Authenticator
    metrics: HttpMetrics


STATE_KEY = web.AppKey("cortex_state", AppState)
CALLER_KEY = web.RequestKey("cortex_caller", Caller)


def state(request: web.Request) -> AppState:
    """The application state of ``request``."""
    return request.app[STATE_KEY]


def caller(request: web.Request) -> Caller:
    """The authenticated caller (set by the auth middleware)."""
    value: Caller = request[CALLER_KEY]
    return value
