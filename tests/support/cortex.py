"""Fixtures that serve the real cortex application over real loopback HTTP.

``cortex`` migrates a fresh PostgreSQL 15 database and serves the app (dev
authentication) on an ephemeral 127.0.0.1 port; ``make_cortex`` does the same for any DSN
and settings, so AGE-backed and hook-configured servers are one call away.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import psycopg
import pytest
from aiohttp import web
from hack.support.pgservers import PgServer
from hack.support.waiting import Pending, await_until
from psycopg import sql

from attested_cortex.server.app import build_app
from attested_cortex.server.assembling import open_services
from attested_cortex.server.auth import Authenticator, DevAuth
from attested_cortex.server.connections import CortexRunner
from attested_cortex.server.settings import ServerSettings
from attested_cortex.server.state import STATE_KEY
from attested_cortex.service.pipeline.context import Services
from attested_cortex.store.migrating import migrate


@dataclass
class Reply:
    """One HTTP answer: status, headers and the decoded JSON body (None if not JSON)."""

    status: int
    headers: Any
    body: Any
    text: str


@dataclass
class CortexClient:
    """A running server and a client session to it."""

    base: str
    session: aiohttp.ClientSession
    services: Services
    agent: str = "dev:tester"
    dsn: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    async def call(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
        agent: str | None = "", headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request; ``agent=None`` sends no identity at all."""
        hdrs = dict(headers or {})
        who = self.agent if agent == "" else agent
        if who is not None and "Authorization" not in hdrs:
            hdrs["X-Agent-Id"] = who
        encoded = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                               else None)
        data = io.BytesIO(encoded) if encoded is not None else None
        if encoded is not None:
            hdrs.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.base + path, data=data, headers=hdrs) as r:
            text = await r.text(errors="replace")
            try:
                parsed = json.loads(text) if text else None
            except json.JSONDecodeError:
                parsed = None
            return Reply(r.status, r.headers, parsed, text)

    async def store(self, namespace: str = "t", content: str = "hello", **more: Any) -> Any:
        """Store a memory and return its JSON (asserts 201)."""
        reply = await self.call("POST", "/v1/memories",
                                {"namespace": namespace, "content": content, **more})
        assert reply.status == 201, reply.text
        return reply.body

    async def embedded_behind(self, *, seconds: float = 30, **call: Any) -> None:
        """Wait (bounded) until the write-behind embedder holds nothing more: every memory
        written so far has its vector, or was left to the backfill (capabilities say so)."""
        async def drained() -> bool | Pending:
            reply = await self.call("GET", "/v1/capabilities", **call)
            assert reply.status == 200, reply.text
            behind = reply.body["recall"].get("write_behind")
            return behind is None or behind["queued"] == 0 or Pending(behind)

        await await_until(drained, what="the write-behind embedder to hold nothing more",
                          seconds=seconds, interval_s=0.02)


MakeCortex = Callable[..., Awaitable[CortexClient]]


@pytest.fixture
async def make_cortex() -> AsyncIterator[MakeCortex]:
    """Factory: ``await make_cortex(dsn, auth=..., **settings)`` serves a migrated database."""
    async with AsyncExitStack() as stack:

        async def factory(
            dsn: str, *, auth: Authenticator | None = None, migrated: bool = True,
            **settings: Any,
        ) -> CortexClient:
            if migrated:
                await migrate(dsn)
            # Load tests send hundreds of requests a second as one agent: the rate quota is
            # off unless a test configures it (tests/server/test_quotas.py does).
            settings.setdefault("quotas", {"enabled": False})
            # The static model unless a test names one: it embeds in microseconds, where the
            # default (MiniLM) takes milliseconds a memory and would slow every test that
            # stores many; tests of recall by meaning name minilm (tests/recall).
            settings.setdefault("embedder", "static")
            config = ServerSettings(database_url=dsn, **settings)
            services = await open_services(config, stack)
            app = build_app(services, auth=auth or DevAuth())
            runner = CortexRunner(app, access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            session = aiohttp.ClientSession()
            stack.push_async_callback(session.close)
            # The services the application holds (with the MCP endpoint's description):
            # a test that installs a step observer installs it where requests run.
            held = app[STATE_KEY].services
            return CortexClient(f"http://127.0.0.1:{port}", session, held, dsn=dsn,
                                extra={"app": app})

        yield factory


@pytest.fixture(scope="session")
def pg15_template(pg15_server: PgServer) -> Iterator[str]:
    """A database migrated once per session, cloned by :func:`migrated_pg15_dsn`."""
    name = f"cortex_tpl_{uuid.uuid4().hex[:8]}"
    _admin(pg15_server, sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(
        sql.Identifier(name)))
    asyncio.run(migrate(pg15_server.dsn(name)))
    yield name
    _admin(pg15_server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
        sql.Identifier(name)))


@pytest.fixture
def migrated_pg15_dsn(pg15_server: PgServer, pg15_template: str) -> Iterator[str]:
    """A fresh database at the current schema (a copy of the session template)."""
    name = f"cortex_{uuid.uuid4().hex[:12]}"
    _admin(pg15_server, sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
        sql.Identifier(name), sql.Identifier(pg15_template)))
    yield pg15_server.dsn(name)
    _admin(pg15_server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
        sql.Identifier(name)))


def _admin(server: PgServer, statement: sql.Composed) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture
async def cortex(make_cortex: MakeCortex, migrated_pg15_dsn: str) -> CortexClient:
    """A server on a fresh, migrated PostgreSQL 15 database with dev authentication."""
    return await make_cortex(migrated_pg15_dsn, migrated=False)
