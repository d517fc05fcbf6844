"""The MCP endpoint: the SDK's low-level server over the tool registry, and its Streamable
HTTP session manager, as one ASGI application the aiohttp server mounts at ``/mcp``.

The SDK does the protocol: JSON-RPC framing, ``initialize`` and the handshake-era sessions
(``Mcp-Session-Id``, GET streams, DELETE), the 2026-07-28 per-request envelope, ping,
tools/list and tools/call dispatch. This module answers tools/list from :data:`.tools.TOOLS`
and hands tools/call to :func:`.calling.call` with the caller the HTTP layer authenticated:
the aiohttp auth middleware runs first and puts the :class:`Caller` into the ASGI scope
under :data:`CALLER_KEY` (and an SDK ``AuthenticatedUser`` under ``user``, so the SDK binds a
session to the agent that opened it). Called by :mod:`attested_cortex.server.mcp_endpoint`.

The manager runs in one task of its own (:meth:`McpEndpoint.start`/:meth:`stop`): the SDK's
anyio task group must be entered and left by the same task, which aiohttp's start-up and
clean-up hooks do not guarantee.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Final

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from attested_cortex import __version__
from attested_cortex.errors import ConflictError, TooManySessionsError
from attested_cortex.mcp import calling
from attested_cortex.mcp.tools import TOOLS
from attested_cortex.service.pipeline.context import Caller, Services

#: Where the authenticated caller travels in the ASGI scope.
CALLER_KEY: Final = "attested_cortex.caller"
PATH: Final = "/mcp"
#: A JSON-RPC envelope around arguments of ``max_body_bytes``: the arguments themselves are
#: held to ``max_body_bytes`` as a tool error (:mod:`.calling`); only a message this much
#: larger is refused by the transport (413).
ENVELOPE_BYTES: Final = 64 * 1024
#: A handshake-era session idle this long is closed (the client initializes again).
SESSION_IDLE_S: Final = 30 * 60
MAX_SESSIONS: Final = 10_000
#: Open sessions one agent may hold: one agent's client that initializes in a loop and never
#: ends its sessions would otherwise take all of :data:`MAX_SESSIONS` (every other agent
#: refused for :data:`SESSION_IDLE_S`) and about 46 kB of server memory each.
MAX_SESSIONS_PER_AGENT: Final = 100

INSTRUCTIONS = (
    "attested-cortex: shared, attested memory for agents. memory_store saves a memory in a "
    "namespace; memory_recall finds memories for a question (budget_tokens bounds the "
    "answer); link_create relates two memories; kg_query, kg_paths and kg_timeline walk the "
    "links. Errors come back as tool results with isError and the HTTP error envelope "
    "({error: {code, message, details}, status})."
)


def tool_list() -> list[types.Tool]:
    """The tools as tools/list shows them."""
    return [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                   annotations=types.ToolAnnotations(read_only_hint=t.read_only,
                                                     open_world_hint=False))
        for t in TOOLS
    ]


def opens_session(scope: Scope) -> bool:
    """Whether the SDK would open a handshake-era session for this request: a POST without
    ``Mcp-Session-Id`` in the handshake era (no ``MCP-Protocol-Version``, or one of those
    versions), as the session manager routes it."""
    if scope.get("method") != "POST" or _header(scope, b"mcp-session-id") is not None:
        return False
    version = _header(scope, b"mcp-protocol-version")
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first of a request's headers called ``name`` (lower case), as the SDK reads
    repeated ones."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    return next((value for key, value in headers if key == name), None)


def _session_request(scope: Scope, body: bytes) -> tuple[str, str, str] | None:
    """(agent, session id, request id as the SDK keys it) of a request in a session, else
    None. The agent is part of it so that another agent presenting the session id learns
    nothing from a 409: the SDK answers it 404."""
    caller = scope.get(CALLER_KEY)
    if scope.get("method") != "POST" or not isinstance(caller, Caller):
        return None
    session = _header(scope, b"mcp-session-id")
    if session is None:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # the SDK answers what it cannot parse
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None  # a notification or a response: nothing is answered
    rid = message.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    return caller.agent_id, session.decode("latin-1"), str(rid)


def scope_values(caller: Caller) -> dict[str, Any]:
    """What the HTTP layer adds to the ASGI scope of an authenticated MCP request."""
    token = AccessToken(token="", client_id=caller.agent_id, subject=caller.agent_id,
                        scopes=[str(s) for s in caller.scopes.scopes])
    return {CALLER_KEY: caller, "user": AuthenticatedUser(token)}


def build_server(svc: Services) -> Server[Any]:
    """The SDK server whose tools run ``svc``'s operations."""
    listed = types.ListToolsResult(tools=tool_list())

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        request = ctx.request
        caller = request.scope.get(CALLER_KEY) if request is not None else None
        if not isinstance(caller, Caller):  # only reachable if mounted without the middleware
            return calling.failure(401, "unauthenticated", "no authenticated caller", {})
        return await calling.call(svc, caller, params.name, params.arguments)

    return Server("attested-cortex", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


class McpEndpoint:
    """The mounted endpoint: the SDK server and its session manager, run in one task."""

    def __init__(self, svc: Services, *, json_response: bool = True) -> None:
        #: ``svc`` with this endpoint's self-description, so capabilities (asked over HTTP
        #: or as an MCP tool) report the endpoint actually mounted; the application holds it.
        self.services = replace(svc, mcp=self.describe)
        self.server = build_server(self.services)
        self.json_response = json_response
        self.manager = StreamableHTTPSessionManager(
            self.server, json_response=json_response,
            max_request_body_size=svc.limits.max_body_bytes + ENVELOPE_BYTES,
            session_idle_timeout=SESSION_IDLE_S, max_sessions=MAX_SESSIONS,
        )
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Requests that may open a session and have not been answered yet, per agent: with
        # the sessions already open, what the per-agent cap counts (exact under concurrency).
        self._opening: Counter[str] = Counter()
        # (agent, session, request id) of the requests being answered now: see in_flight.
        self._in_flight: set[tuple[str, str, str]] = set()

    async def start(self) -> None:
        """Run the session manager until :meth:`stop`."""
        started = asyncio.Event()

        async def run() -> None:
            async with self.manager.run():
                started.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run(), name="mcp-session-manager")
        waiter = asyncio.create_task(started.wait())
        await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiter.cancel()
            await self._task  # raises what stopped it

    def stop(self) -> None:
        """End every session (open GET streams too)."""
        self._stop.set()

    async def wait_stopped(self) -> None:
        """Wait until the manager has shut down."""
        self.stop()
        if self._task is not None:
            await self._task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = scope.get(CALLER_KEY)
        if not isinstance(caller, Caller) or not opens_session(scope):
            await self.manager.handle_request(scope, receive, send)
            return
        agent = caller.agent_id
        held = self.open_sessions(agent) + self._opening[agent]
        if held >= MAX_SESSIONS_PER_AGENT:
            raise TooManySessionsError(
                f"agent {agent} has {held} open MCP sessions, the most one agent may hold: "
                "end sessions you no longer use (DELETE /mcp with their Mcp-Session-Id) or "
                f"wait for idle ones to close ({SESSION_IDLE_S // 60} minutes)",
                limit=MAX_SESSIONS_PER_AGENT)
        self._opening[agent] += 1
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            self._opening[agent] -= 1
            if self._opening[agent] <= 0:
                del self._opening[agent]

    @contextmanager
    def in_flight(self, scope: Scope, body: bytes) -> Iterator[None]:
        """Hold the request id of a session's request while it is answered: a second
        request of the session with an id still in flight is 409 ``request_id_in_use``.
        The SDK routes each answer by the session and the id (as text), so two at once
        lost an answer: the first request waited for ever and another got its answer."""
        key = _session_request(scope, body)
        if key is None:
            yield
            return
        if key in self._in_flight:
            raise ConflictError(f"request id {key[2][:100]!r} is already in flight in this "
                                "session: give every concurrent request its own id",
                                code="request_id_in_use")
        self._in_flight.add(key)
        try:
            yield
        finally:
            self._in_flight.discard(key)

    def open_sessions(self, agent: str) -> int:
        """The handshake-era sessions ``agent`` holds open now."""
        # the SDK keeps each session's owner (what it answers 404 to others by) privately
        owners = self.manager._session_owners.values()
        return sum(1 for owner in owners if owner["client_id"] == agent)

    def describe(self) -> dict[str, Any]:
        """The endpoint as ``/v1/capabilities`` reports it (only while mounted)."""
        return {
            "enabled": True,
            "path": PATH,
            "transport": "streamable-http",
            "protocol_versions": [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS],
            "latest_protocol_version": MODERN_PROTOCOL_VERSIONS[-1],
            "latest_handshake_version": HANDSHAKE_PROTOCOL_VERSIONS[-1],
            # the SDK keeps no public count of open sessions: its own table is the live truth
            "sessions": {"open": len(self.manager._server_instances),
                         "idle_timeout_seconds": SESSION_IDLE_S, "max": MAX_SESSIONS,
                         "max_per_agent": MAX_SESSIONS_PER_AGENT},
            "responses": "json" if self.json_response else "sse",
            "tools": [t.name for t in TOOLS],
            "sdk": "mcp (official Python SDK)",
        }
