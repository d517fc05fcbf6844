"""The MCP client side of the tests: the official SDK's client over streamable HTTP (both
protocol eras) against a cortex served by :mod:`tests.support.cortex`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from attested_cortex.mcp.relay import http_client
from tests.support.cortex import CortexClient


@asynccontextmanager
async def mcp_client(cortex: CortexClient, *, agent: str | None = None, mode: str = "legacy",
                     headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """An SDK client session to ``cortex``'s /mcp as ``agent`` (dev auth's X-Agent-Id).

    ``mode="legacy"`` runs the initialize handshake (a session, Mcp-Session-Id);
    ``"auto"`` lets the client probe the 2026-07-28 per-request envelope first."""
    sent = dict(headers or {})
    if "Authorization" not in sent:
        sent["X-Agent-Id"] = agent or cortex.agent
    async with http_client(sent) as http:
        transport = streamable_http_client(f"{cortex.base}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client

