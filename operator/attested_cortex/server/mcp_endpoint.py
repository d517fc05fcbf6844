"""``/mcp``: the MCP endpoint (:mod:`attested_cortex.mcp.serving`) mounted on the aiohttp
application through a small ASGI bridge (ADR 0012).

The request has passed the same middleware as every route (request id, access log, metrics,
authentication: a bearer token, a service-account token, or ``X-Agent-Id`` with ``--auth
dev``; 401 in the envelope otherwise), and a browser's request from another origin is 403
(``Origin``, as the transport requires against DNS rebinding). The handler then serves it
with the SDK's ASGI application: the scope carries the method, path, headers and the
authenticated caller, the body is read first within ``limits.body_read_timeout_s`` (408
otherwise, as on every route) and handed over whole (the SDK refuses one past
``max_body_bytes`` plus the JSON-RPC envelope with 413), and its answer is written back,
buffered when it is one body (a JSON response) and streamed when it is not (server-sent
events: their headers go out at once, and a client that goes away is reported to the SDK as
``http.disconnect``). Called by :func:`attested_cortex.server.app.build_app`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from starlette.types import Message

from attested_cortex.errors import DeniedError
from attested_cortex.mcp.serving import ENVELOPE_BYTES, PATH, McpEndpoint, scope_values
from attested_cortex.server.body import body_deadline, check_content_type
from attested_cortex.server.openapi import Operation
from attested_cortex.server.state import caller, state

ENDPOINT_KEY = web.AppKey("cortex_mcp", McpEndpoint)
_READ_CHUNK = 64 * 1024
#: How often an open stream looks whether its client went away.
_DISCONNECT_POLL_S = 1.0
#: What the transport answers besides success (JSON-RPC error bodies; docs/mcp.md).
_TRANSPORT = {400: "Not a valid JSON-RPC message, or a request without a session",
              404: "Unknown or expired Mcp-Session-Id", 405: "Method not allowed in this era",
              406: "Accept must name application/json and text/event-stream",
              409: "The request id is in flight in this session (request_id_in_use)",
              413: "The message is larger than max_body_bytes plus the JSON-RPC envelope",
              415: "Content-Type must be application/json", 422: "Unprocessable message",
              429: "The agent holds the most open sessions one agent may (too_many_sessions)",
              503: "Too many open sessions"}
_SUMMARY = ("Model Context Protocol, Streamable HTTP (JSON-RPC; the memory tools through the "
            "same pipeline as these routes; docs/mcp.md)")
operations = [
    Operation(method, PATH, _SUMMARY, 200, None, errors=(401, 403),
              extra_responses={202: "Notification or response accepted", **_TRANSPORT})
    for method in ("POST", "GET", "DELETE")
]


def mount(app: web.Application, endpoint: McpEndpoint) -> None:
    """Serve ``endpoint`` at ``/mcp`` (POST, GET, DELETE) for the application's lifetime."""
    app[ENDPOINT_KEY] = endpoint
    app.router.add_route("POST", PATH, handle)
    app.router.add_route("GET", PATH, handle)
    app.router.add_route("DELETE", PATH, handle)
    app.on_startup.append(_start)
    app.on_shutdown.append(_stop)  # before the server waits for open GET streams
    app.on_cleanup.append(_wait)


async def _start(app: web.Application) -> None:
    await app[ENDPOINT_KEY].start()


async def _stop(app: web.Application) -> None:
    app[ENDPOINT_KEY].stop()


async def _wait(app: web.Application) -> None:
    await app[ENDPOINT_KEY].wait_stopped()


async def handle(request: web.Request) -> web.StreamResponse:
    """One MCP HTTP request, answered by the SDK."""
    check_origin(request)
    endpoint = request.app[ENDPOINT_KEY]
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method, "scheme": request.scheme, "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"), "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": tuple(peer[:2]) if isinstance(peer, tuple) else None,
        "server": None, "state": {}, **scope_values(caller(request)),
    }
    if request.method == "POST":
        # As on every route: JSON in UTF-8, a missing Content-Type taken as JSON (the SDK
        # answered both a missing and a wrong one with a plain-text 400, not the 415 the
        # documents promise)
        check_content_type(request.headers.get("Content-Type"))
        if "Content-Type" not in request.headers:
            scope["headers"].append((b"content-type", b"application/json"))
    bridge = _Bridge(request)
    await bridge.read_body(cap=state(request).services.limits.max_body_bytes + ENVELOPE_BYTES)
    with endpoint.in_flight(scope, bridge.body):
        await endpoint(scope, bridge.receive, bridge.send)
    return await bridge.finish()


def check_origin(request: web.Request) -> None:
    """The transport's Origin rule (against DNS rebinding): a browser page may only call
    /mcp from the server's own origin. MCP clients outside browsers send no Origin."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise DeniedError("requests from another origin may not use /mcp",
                          code="origin_not_allowed", origin=origin[:200])


class _Bridge:
    """ASGI receive/send over one aiohttp request and its response."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.body = b""
        self.body_done = False
        self.status = 500
        self.headers: list[tuple[str, str]] = []
        self.buffered: web.Response | None = None
        self.stream: web.StreamResponse | None = None

    async def read_body(self, *, cap: int) -> None:
        """The whole body, within ``limits.body_read_timeout_s`` as on every route (a client
        that trickles it gets 408 before the SDK sees anything); at most ``cap`` + 1 bytes
        are kept, which the SDK refuses with its own 413."""
        chunks: list[bytes] = []
        size = 0
        async with body_deadline(self.request):
            while size <= cap:
                chunk = await self.request.content.read(_READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        self.body = b"".join(chunks)

    async def receive(self) -> Message:
        if not self.body_done:
            self.body_done = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        # The body is read: the next event is the client going away, which an SSE response
        # (a session's GET stream) listens for to end its stream. aiohttp has no callback for
        # it (nor cancels the handler), so the transport is looked at every second; without
        # this only a failed keep-alive ping noticed, up to 30 s in which the session's one
        # stream could not be reopened (409), then an error logged per dropped stream.
        while not self.disconnected():  # noqa: ASYNC110 - aiohttp offers no event to await
            await asyncio.sleep(_DISCONNECT_POLL_S)
        return {"type": "http.disconnect"}

    def disconnected(self) -> bool:
        """Whether the client's connection is gone (or going)."""
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = [(k.decode("latin-1"), v.decode("latin-1"))
                            for k, v in message.get("headers", [])]
            if any(name.lower() == "content-type" and value.startswith("text/event-stream")
                   for name, value in self.headers):
                # A stream's first event may be long in coming (a GET stream's is the
                # keep-alive ping, 15 s on): its headers go out now, not with that event.
                await self._open_stream()
            return
        if kind != "http.response.body":
            return
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        if self.stream is None and self.buffered is None and not more:
            response = web.Response(status=self.status, body=body)
            for name, value in self.headers:
                if name.lower() != "content-length":
                    response.headers.add(name, value)
            self.buffered = response
            return
        stream = self.stream or await self._open_stream()
        if body:
            await stream.write(body)
        if not more:
            await stream.write_eof()

    async def _open_stream(self) -> web.StreamResponse:
        """Start the streamed response: status and headers are sent at once."""
        stream = web.StreamResponse(status=self.status)
        for name, value in self.headers:
            if name.lower() != "content-length":
                stream.headers.add(name, value)
        await stream.prepare(self.request)
        self.stream = stream
        return stream

    async def finish(self) -> web.StreamResponse:
        if self.buffered is not None:
            return self.buffered
        if self.stream is not None:
            return self.stream
        return web.Response(status=self.status)
