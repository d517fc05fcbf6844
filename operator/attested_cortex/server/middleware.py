"""Request middleware: request id + access log + metrics, then authentication.

Order (outermost first): request context -> errors -> authentication (with the effective
scopes of the caller's trust tier, ADR 0049) and the rate quota -> route. Public paths
(health, readiness, metrics, OpenAPI) need no credentials and cost no token.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
from typing import Any

from aiohttp import web

from attested_cortex.errors import DeniedError
from attested_cortex.mcp.serving import PATH as MCP_PATH
from attested_cortex.server.auth import confine
from attested_cortex.server.logs import request_id
from attested_cortex.server.replaying import key_of
from attested_cortex.server.state import CALLER_KEY, state
from attested_cortex.service.pipeline import recording
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.service.pipeline.running import take_rate

log = logging.getLogger("attested_cortex.access")

#: Completing an approved request: the approval id it spends.
APPROVAL_HEADER = "X-Cortex-Approval"
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/openapi.json",
                          "/v1/federation/keyring", "/v1/delivery-report"})
#: Authenticated by the route itself (a federation peer's TLS client certificate).
PEER_PATHS = frozenset({"/v1/federation/changes"})
_GOOD_ID = re.compile(r"[A-Za-z0-9._\-]{1,64}")


@web.middleware
async def context_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Assign a request id, log the request and record its metrics."""
    given = request.headers.get("X-Request-Id", "")
    rid = given if _GOOD_ID.fullmatch(given) else uuid.uuid4().hex
    token = request_id.set(rid)
    started = time.perf_counter()
    resource = getattr(request.match_info.route, "resource", None)  # None: an adapter's
    route = resource.canonical if resource is not None else "unmatched"
    status = 500
    try:
        response: web.StreamResponse = await handler(request)
        status = response.status
        response.headers["X-Request-Id"] = rid
        return response
    finally:
        elapsed = time.perf_counter() - started
        metrics = state(request).metrics
        metrics.requests.labels(route, request.method, str(status)).inc()
        metrics.latency.labels(route, request.method).observe(elapsed)
        log.info("request", extra={
            "method": request.method, "path": request.path, "status": status,
            "ms": round(elapsed * 1000, 3),
        })
        request_id.reset(token)


@web.middleware
async def auth_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Authenticate every non-public request (401 in the envelope on failure), then take its
    rate-quota token (429) before the route reads a byte of its body or looks anything up.
    ``/mcp`` is the exception: its tool calls take theirs in the pipeline, so a client over
    its quota gets a tool error, as MCP clients expect (an HTTP 429 ends the SDK's session),
    and the transport's own requests (handshake, event stream) cost none."""
    if request.path not in PUBLIC_PATHS and request.path not in PEER_PATHS:
        caller = await _confined(request)
        approval = request.headers.get(APPROVAL_HEADER)
        rated = request.path != MCP_PATH
        if rated:
            take_rate(state(request).services, caller)
        caller = dataclasses.replace(caller, approval=None if approval is None else approval[:64],
                                     rated=rated, idempotency_key=key_of(request))
        request[CALLER_KEY] = caller
    response: web.StreamResponse = await handler(request)
    return response


async def _confined(request: web.Request) -> Caller:
    """The authenticated caller with its effective scopes; a refusal of its tier or of the
    scopes it asked for is recorded in the audit chain (as the pipeline records its own)."""
    services = state(request).services
    caller = await state(request).auth.authenticate(request.headers)
    try:
        return confine(caller, services.policy.ceilings, request.headers)
    except DeniedError as exc:
        take_rate(services, caller)  # a refusal appends an event: bounded as any request
        resource = getattr(request.match_info.route, "resource", None)
        where = f"{request.method} {resource.canonical if resource is not None else request.path}"
        try:
            await recording.refused_at_entry(services, caller, where[:200], exc)
        except Exception:  # the refusal stands; a lost record is logged loudly
            log.exception("the audit of a refusal failed", extra={"code": exc.code})
        raise
