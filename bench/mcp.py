"""MCP: memory_recall over /mcp against POST /v1/recall at 10k memories, and how /mcp is
mounted (ADR 0012).

Goal (issue 14): the MCP round trip's p95 within 2 ms of the HTTP route's. Both go to the
same ``cortexctl serve`` (full-text recall, ``--embedder none``, so the query's own cost is
the smallest and steadiest part), one query at a time, each query sent by every variant in
a rotating order (paired, interleaved: host noise lands on all of them):

* ``http``: ``POST /v1/recall`` (aiohttp client);
* ``mcp_session``: ``tools/call`` on an initialized session (``Mcp-Session-Id``, JSON
  response), the same aiohttp client: what the server adds;
* ``mcp_sdk_modern`` / ``mcp_sdk_session``: the official SDK's client, 2026-07-28
  per-request envelope / handshake-era session: what an agent host built on the SDK sees
  (the client's own validation included);
* ``http_httpx2``: ``POST /v1/recall`` with the HTTP client library the SDK's client uses
  (``httpx2``), which separates that library's cost from MCP's.

The mount comparison serves a 2k-memory database three ways in subprocesses (the SDK's
manager behind this project's ASGI bridge with JSON responses, the same with SSE responses,
and through the ``aiohttp-asgi`` adapter when it is installed) and times ``tools/call``
memory_recall on a session, paired the same way.

``python -m bench mcp`` (or ``python -m bench.mcp``) writes docs/benchmarks/mcp.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
from hack.support.served import free_port, serve, stop, wait_until_up

from attested_cortex.store.migrating import migrate
from bench.common import (
    age_server,
    cpu_seconds,
    create_database,
    percentiles,
    unthrottled_config,
    write_result,
)
from bench.textgen import TextGenerator

QUERIES = 600
WARMUP = 60
MOUNT_QUERIES = 400
ACCEPT = "application/json, text/event-stream"


def load() -> list[float]:
    """The 1/5/15-minute load averages (recorded next to every figure)."""
    return [round(x, 2) for x in os.getloadavg()]


async def open_session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    """Initialize a handshake-era session; the headers every later request carries."""
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}}
    async with http.post(url, json=hello, headers={"Accept": ACCEPT}) as response:
        assert response.status == 200, await response.text()
        session = {"Accept": ACCEPT, "Mcp-Session-Id": response.headers["Mcp-Session-Id"],
                   "MCP-Protocol-Version": "2025-11-25"}
    async with http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                         headers=session) as response:
        assert response.status == 202, await response.text()
    return session


async def session_call(http: aiohttp.ClientSession, url: str, session: dict[str, str],
                       arguments: dict[str, Any], n: int) -> None:
    """One tools/call memory_recall on ``session`` (JSON or SSE answer, read whole)."""
    message = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
               "params": {"name": "memory_recall", "arguments": arguments}}
    async with http.post(url, json=message, headers=session) as response:
        text = await response.text()
        assert response.status == 200, text
    if text.startswith("{"):
        assert not json.loads(text)["result"].get("isError"), text[:300]
    else:
        assert '"isError":true' not in text, text[:300]


async def paired_recalls(base: str, gen: TextGenerator, *, queries: int = QUERIES,
                         warmup: int = WARMUP) -> dict[str, Any]:
    """Every variant answers each query, in a rotating order; p50/p95 and deltas."""
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    from attested_cortex.mcp.relay import http_client

    url = f"{base}/mcp"
    names = ("http", "mcp_session", "mcp_sdk_modern", "mcp_sdk_session", "http_httpx2")
    samples: dict[str, list[float]] = {n: [] for n in names}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}))
        session = await open_session(http, url)
        clients = {}
        plain = await stack.enter_async_context(
            http_client({"X-Agent-Id": "bench"}))
        for name, mode in (("mcp_sdk_modern", "auto"), ("mcp_sdk_session", "legacy")):
            pool = await stack.enter_async_context(
                http_client({"X-Agent-Id": "bench"}))
            clients[name] = await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=pool), mode=mode))

        async def send(name: str, body: dict[str, Any], n: int) -> None:
            if name == "http":
                async with http.post(f"{base}/v1/recall", json=body) as response:
                    payload = await response.json()
                    assert response.status == 200, payload
            elif name == "http_httpx2":
                reply = await plain.post(f"{base}/v1/recall", json=body)
                assert reply.status_code == 200, reply.text
                reply.json()
            elif name == "mcp_session":
                await session_call(http, url, session, body, n)
            else:
                result = await clients[name].call_tool("memory_recall", body)
                assert not result.is_error, result.content

        for i in range(warmup + queries):
            body: dict[str, Any] = {"query": gen.query(), "limit": 10}
            if i % 3 == 0:
                body["namespace"] = gen.rng.choice(gen.namespaces)
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                started = time.perf_counter()
                await send(name, body, i + 1)
                if i >= warmup:
                    samples[name].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {name: percentiles(values) for name, values in samples.items()}
    for name in names[1:]:
        if name == "http_httpx2":
            continue
        out[f"{name}_p50_delta_ms"] = round(out[name]["p50"] - out["http"]["p50"], 3)
        out[f"{name}_p95_delta_ms"] = round(out[name]["p95"] - out["http"]["p95"], 3)
        # the same query's two round trips, sent back to back: the overhead per call
        out[f"{name}_paired_difference_ms"] = percentiles(
            [m - h for m, h in zip(samples[name], samples["http"], strict=True)])
    for name in ("mcp_sdk_modern", "mcp_sdk_session"):  # the SDK client against its own
        out[f"{name}_vs_httpx2_p95_delta_ms"] = round(  # HTTP library: MCP's share
            out[name]["p95"] - out["http_httpx2"]["p95"], 3)
    out["load_average"] = load()
    return out


async def server_cpu(base: str, pid: int, gen: TextGenerator, *, calls: int = 500,
                     rounds: int = 2) -> dict[str, Any]:
    """The server process's CPU per recall, HTTP route against tools/call on a session:
    the cost MCP adds, which load on a shared machine does not inflate as it does
    latency. Best of ``rounds`` (each ``calls`` calls of each kind)."""
    bodies = [{"query": gen.query(), "limit": 10} for _ in range(calls)]
    best: dict[str, float] = {}
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as http:
        session = await open_session(http, f"{base}/mcp")
        for _ in range(rounds):
            for kind in ("http", "mcp_session"):
                before = cpu_seconds(pid)
                for n, body in enumerate(bodies, 1):
                    if kind == "http":
                        async with http.post(f"{base}/v1/recall", json=body) as response:
                            await response.read()
                    else:
                        await session_call(http, f"{base}/mcp", session, body, n)
                per_call = (cpu_seconds(pid) - before) / calls * 1000
                best[kind] = round(min(best.get(kind, per_call), per_call), 3)
    return {"http_ms": best["http"], "mcp_session_ms": best["mcp_session"],
            "mcp_added_ms": round(best["mcp_session"] - best["http"], 3),
            "calls": calls, "rounds": rounds, "load_average": load()}


# -- the mount comparison: one server process per way of mounting /mcp ---------------------

MOUNTS = ("bridge_json", "bridge_sse", "aiohttp_asgi_json")


def serve_variant(variant: str, dsn: str, port: int) -> None:
    """Child process: serve ``dsn`` with /mcp mounted as ``variant`` until killed."""
    from attested_cortex.mcp.serving import McpEndpoint, scope_values
    from attested_cortex.server import app as app_module
    from attested_cortex.server import mcp_endpoint
    from attested_cortex.server.assembling import open_services
    from attested_cortex.server.auth import DevAuth, parse_agent_id
    from attested_cortex.server.connections import CortexRunner
    from attested_cortex.server.serving import freeze_startup_heap
    from attested_cortex.server.settings import ServerSettings
    from attested_cortex.service.pipeline.context import Caller

    async def main() -> None:
        async with AsyncExitStack() as stack:
            settings = ServerSettings(database_url=dsn, embedder="none",
                                      quotas={"enabled": False})
            services = await open_services(settings, stack)
            app = app_module.build_app(services, auth=DevAuth(), mcp=False)
            endpoint = McpEndpoint(services, json_response=variant != "bridge_sse")
            if variant.startswith("bridge"):
                mcp_endpoint.mount(app, endpoint)
            else:
                from aiohttp_asgi import ASGIResource

                async def with_caller(scope: Any, receive: Any, send: Any) -> None:
                    agent = dict(scope["headers"]).get(b"x-agent-id", b"bench").decode()
                    scope.update(scope_values(Caller(parse_agent_id(agent), "dev")))
                    await endpoint(scope, receive, send)

                app.router.register_resource(ASGIResource(with_caller, root_path="/mcp"))
                app.on_startup.append(lambda _: endpoint.start())
                app.on_cleanup.append(lambda _: endpoint.wait_stopped())
            runner = CortexRunner(app, access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            from aiohttp import web

            await web.TCPSite(runner, "127.0.0.1", port).start()
            freeze_startup_heap()
            await asyncio.Event().wait()

    asyncio.run(main())


async def paired_mounts(bases: dict[str, str], gen: TextGenerator) -> dict[str, Any]:
    """tools/call memory_recall on a session of each mount, rotating, plus the HTTP route."""
    samples: dict[str, list[float]] = {name: [] for name in (*bases, "http")}
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "bench"}) as http:
        sessions = {name: await open_session(http, f"{base}/mcp")
                    for name, base in bases.items()}
        names = list(samples)
        first = next(iter(bases.values()))
        for i in range(WARMUP + MOUNT_QUERIES):
            body = {"query": gen.query(), "limit": 10}
            for name in names[i % len(names):] + names[:i % len(names)]:
                started = time.perf_counter()
                if name == "http":
                    async with http.post(f"{first}/v1/recall", json=body) as response:
                        assert response.status == 200
                        await response.read()
                else:
                    await session_call(http, f"{bases[name]}/mcp", sessions[name], body, i + 1)
                if i >= WARMUP:
                    samples[name].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {name: percentiles(values) for name, values in samples.items()}
    out["load_average"] = load()
    return out


def compare_mounts(dsn: str, tmp: Path) -> dict[str, Any]:
    """Serve ``dsn`` once per mount (subprocesses) and time them side by side."""
    available = [m for m in MOUNTS if m != "aiohttp_asgi_json" or _has_aiohttp_asgi()]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    bases: dict[str, str] = {}
    try:
        for variant in available:
            port = free_port()
            log = (tmp / f"{variant}.log").open("wb")
            processes[variant] = subprocess.Popen(
                [sys.executable, "-m", "bench.mcp", "serve-variant", variant, dsn, str(port)],
                stdout=log, stderr=subprocess.STDOUT)
            bases[variant] = f"http://127.0.0.1:{port}"
            wait_until_up(f"{bases[variant]}/healthz", processes[variant])
        out = asyncio.run(paired_mounts(bases, TextGenerator(seed=7)))
    finally:
        for process in processes.values():
            stop(process)
    if "aiohttp_asgi_json" not in available:
        out["aiohttp_asgi_json"] = "not installed (pip install aiohttp-asgi to compare)"
    return out


def _has_aiohttp_asgi() -> bool:
    try:
        import aiohttp_asgi  # noqa: F401
    except ImportError:
        return False
    return True


def run() -> dict[str, Any]:
    """Load 10k memories, time MCP against HTTP, compare mounts; write mcp.json."""
    from bench.recall import bulk_load

    out: dict[str, Any] = {"goals": {"mcp_recall_p95_overhead_ms_10k": 2}}
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        small = create_database(server, "bench_mcp_mounts")
        asyncio.run(migrate(small))
        bulk_load(small, TextGenerator(seed=13), 2000)
        out["mounts_2k"] = compare_mounts(small, Path(tmp))
        dsn = create_database(server, "bench_mcp")
        asyncio.run(migrate(dsn))
        bulk_load(dsn, TextGenerator(seed=11), 10_000)
        config = str(unthrottled_config(Path(tmp)))
        with serve(dsn, Path(tmp), "--config", config, "--embedder", "none") as served:
            out["recall_10k"] = {**asyncio.run(paired_recalls(served.base, TextGenerator(seed=5))),
                                 "mode": "fulltext (--embedder none)"}
            out["server_cpu_per_recall_10k"] = asyncio.run(
                server_cpu(served.base, served.process.pid, TextGenerator(seed=9)))
    write_result("mcp", out)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve-variant":
        serve_variant(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(json.dumps(run(), indent=2))
