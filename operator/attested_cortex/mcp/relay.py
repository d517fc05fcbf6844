"""``cortexctl mcp``: a stdio MCP server for local agent hosts that relays every tool call to
a running cortex's ``/mcp`` endpoint with the caller's own credentials.

Both sides are the SDK: its stdio server faces the agent host, its Streamable HTTP client
faces the cortex. The relay holds no tool table of its own: tools/list answers what the
cortex lists, and tools/call forwards the call and hands back the cortex's result unchanged,
so authentication, scopes, rules, hooks, quotas, audit and the error codes are the server's
(ADR 0012 says why MCP-to-MCP and not the REST routes). A call the cortex cannot be reached
for is a tool error with code ``upstream_unavailable`` (status 503), never a dead stdio
session: each call is its own short upstream exchange over one pooled HTTP client (with the
2026-07-28 per-request envelope that is one POST), so a failure ends that call, not the
relay. Called by :mod:`attested_cortex.cli.mcp`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from attested_cortex import __version__
from attested_cortex.errors import CortexError
from attested_cortex.mcp.calling import check_arguments, failure
from attested_cortex.mcp.serving import INSTRUCTIONS

log = logging.getLogger(__name__)
#: How long the start-up probe (initialize, tools/list) may take. The agent host waits on it,
#: and the SDK's HTTP client would wait 300 s for each answer of a cortex (or anything else
#: on that port) that accepted the connection and never answered.
STARTUP_TIMEOUT_S: Final = 15.0
#: The SDK transports' own defaults (30 s to connect, write or wait for the pool; 300 s per
#: read, since an answer may be a held-open stream). Ours, not the SDK's private helper's
#: (``mcp.shared._httpx_utils``), so that an SDK release may move that helper freely.
HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)


class UpstreamTimeoutError(Exception):
    """The cortex did not answer the start-up probe in time."""


@dataclass(frozen=True)
class Upstream:
    """Where the cortex is and who the relay calls it as."""

    url: str  # the /mcp endpoint
    headers: Mapping[str, str]  # Authorization: Bearer ..., or X-Agent-Id (dev auth)
    #: How an https:// cortex is verified (``pki.client_context``: its CA or the system's).
    tls: ssl.SSLContext | None = None


def http_client(headers: Mapping[str, str],
                tls: ssl.SSLContext | None = None) -> httpx2.AsyncClient:
    """The pooled HTTP client an SDK transport sends through, with ``headers`` on every
    request and ``tls`` verifying an https:// cortex (None: the system's roots); use it as
    an async context manager."""
    return httpx2.AsyncClient(headers=dict(headers), timeout=HTTP_TIMEOUT,
                              verify=tls if tls is not None else True)


def endpoint_url(server: str) -> str:
    """The ``/mcp`` URL of a cortex given by its base URL (or by the endpoint itself)."""
    base = server.rstrip("/")
    return base if base.endswith("/mcp") else f"{base}/mcp"


@dataclass(frozen=True)
class Forwarder:
    """Sends one tool call to the cortex, in the protocol era the start-up probe found."""

    url: str
    http: httpx2.AsyncClient
    version: str
    #: The cortex's ``limits.max_body_bytes`` (None: unknown): the arguments' bound.
    max_argument_bytes: int | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        mode = self.version if self.version in MODERN_PROTOCOL_VERSIONS else "legacy"
        transport = streamable_http_client(self.url, http_client=self.http)
        async with Client(transport, mode=mode) as upstream:
            return await upstream.call_tool(name, arguments)


def build_relay(upstream: Forwarder, tools: list[types.Tool]) -> Server[Any]:
    """The stdio-facing server: ``tools`` as listed by the cortex, calls forwarded."""
    listed = types.ListToolsResult(tools=tools)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if upstream.max_argument_bytes is not None:
            # The bounds the cortex holds arguments to, checked here: past them its transport
            # refuses the whole message (413), which reached the host as a 503
            # upstream_unavailable instead of the cortex's own 413 too_large.
            try:
                check_arguments(arguments, max_bytes=upstream.max_argument_bytes)
            except CortexError as exc:
                return failure(exc.http_status, exc.code, exc.message, exc.details)
        try:
            result = await upstream.call_tool(params.name, arguments)
        except MCPError as exc:
            return failure(503, "upstream_unavailable",
                           f"the cortex refused or lost the call: {exc.error.message}",
                           {"jsonrpc_code": exc.error.code})
        except Exception as exc:  # the network: the agent host sees a tool error, not EOF
            cause = _innermost(exc)
            log.warning("the cortex could not be reached: %s", type(cause).__name__)
            return failure(503, "upstream_unavailable",
                           f"the cortex could not be reached ({type(cause).__name__})", {})
        if not isinstance(result, types.CallToolResult):
            return failure(502, "upstream_unexpected", "the cortex answered an unexpected "
                           "result type", {})
        return result

    return Server("attested-cortex", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(target: Upstream) -> None:
    """Connect to the cortex, then serve stdio until the agent host closes it.

    The cortex is reached with the 2026-07-28 per-request envelope when it speaks it (every
    call a plain POST, nothing to expire while the host idles) and with a session otherwise.
    """
    async with http_client(target.headers, target.tls) as http:
        transport = streamable_http_client(target.url, http_client=http)
        try:
            async with asyncio.timeout(STARTUP_TIMEOUT_S):
                async with Client(transport, mode="auto") as probe:  # reachable, authenticated?
                    tools = (await probe.list_tools()).tools
                    version = probe.protocol_version
                    limits = await probe.call_tool("capabilities", {})
        except TimeoutError as exc:
            raise UpstreamTimeoutError(f"no answer within {STARTUP_TIMEOUT_S:g} s") from exc
        relay = build_relay(Forwarder(target.url, http, version, _max_body(limits)), tools)
        async with stdio_server() as (read, write):
            await relay.run(read, write, relay.create_initialization_options())


def _max_body(capabilities: Any) -> int | None:
    """``limits.max_body_bytes`` from the capabilities tool's answer, if it gave one."""
    body = getattr(capabilities, "structured_content", None)
    limits = body.get("limits") if isinstance(body, dict) and not capabilities.is_error else None
    value = limits.get("max_body_bytes") if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
