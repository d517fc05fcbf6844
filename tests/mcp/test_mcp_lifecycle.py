"""The endpoint's lifetime in a real ``cortexctl serve``: an open GET stream of a session
does not hold shutdown up (the session manager is stopped before aiohttp waits for
handlers), and the process exits cleanly."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
from hack.support.served import serve

ACCEPT = {"Accept": "application/json, text/event-stream", "X-Agent-Id": "dev:t"}


async def test_shutdown_ends_open_streams_promptly(migrated_pg15_dsn: str,
                                                   tmp_path: Path) -> None:
    with serve(migrated_pg15_dsn, tmp_path) as served:
        async with aiohttp.ClientSession() as http:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}
            async with http.post(f"{served.base}/mcp", json=hello, headers=ACCEPT) as opened:
                assert opened.status == 200
                session = {**ACCEPT, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
                           "MCP-Protocol-Version": "2025-11-25"}
            async with http.get(f"{served.base}/mcp", headers=session) as stream:
                assert stream.status == 200
                started = time.monotonic()
                served.process.terminate()
                async with asyncio.timeout(10):  # the stream ends instead of hanging
                    await stream.read()
                code = await asyncio.to_thread(served.process.wait, 10)
    assert code == 0
    assert time.monotonic() - started < 5  # under the server's 5 s shutdown_timeout
    assert "Traceback" not in served.log.read_text()
