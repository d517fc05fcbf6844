"""A real webhook receiver for the subscription tests: an aiohttp server on 127.0.0.1 that
verifies every delivery with the Standard Webhooks reference library (``standardwebhooks``,
not the cortex's code) and records it. ``mode`` decides the answer: ``ok`` (204), ``down``
(503), ``hang`` (never answers) or ``redirect`` (307 to another receiver). :func:`fleet` serves
many subscriptions' receivers at once and counts duplicate deliveries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web
from standardwebhooks import Webhook

Mode = Literal["ok", "down", "hang", "redirect"]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Receiver:
    url: str = ""
    mode: Mode = "ok"
    secret: str | None = None
    redirect_to: str = ""
    accepted: list[dict[str, Any]] = field(default_factory=list)  # verified and 2xx
    attempts: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    refused_signatures: int = 0
    delay_s: float = 0.0  # a slow receiver's pace (test_replicas: the stream still flows)

    def ids(self) -> list[str]:
        return [d["id"] for d in self.accepted]

    def by_key(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for delivery in self.accepted:
            found.setdefault(delivery["body"]["key"], []).append(delivery)
        return found

    def first_revisions(self) -> dict[str, list[int]]:
        """Each key's revisions in the order their first deliveries arrived: a redelivery
        (the same webhook-id, after a crash or a takeover) is counted once."""
        first: dict[str, dict[str, Any]] = {}
        for delivery in self.accepted:
            first.setdefault(delivery["id"], delivery)
        chains: dict[str, list[int]] = {}
        for delivery in first.values():
            chains.setdefault(delivery["body"]["key"], []).append(
                delivery["body"]["data"]["revision"])
        return chains

    async def subscribe(self, base: str) -> None:
        """Subscribes this receiver to stores and updates through ``base``'s API (as the
        admin, loopback allowed), keeping the secret it is given."""
        body = {"name": "archive", "url": self.url, "events": ["post_store", "post_update"],
                "allow_private_targets": True}
        async with aiohttp.ClientSession(base, headers={"X-Agent-Id": "dev:admin"}) as http, \
                http.post("/v1/subscriptions", json=body) as r:
            assert r.status == 201, await r.text()
            self.secret = (await r.json())["secret"]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            raw = await request.read()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.mode == "hang":
                await asyncio.Event().wait()  # held until the client gives up
            if self.mode == "down":
                return web.Response(status=503)
            if self.mode == "redirect":
                raise web.HTTPTemporaryRedirect(self.redirect_to)
            assert self.secret is not None
            try:
                Webhook(self.secret).verify(raw, dict(request.headers))
            except Exception:
                self.refused_signatures += 1
                return web.Response(status=401)
            self.accepted.append({"id": request.headers["webhook-id"],
                                  "body": json.loads(raw)})
            return web.Response(status=204)
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def _on_loopback(path: str, handler: Handler) -> AsyncIterator[str]:
    """Serves ``handler`` for POSTs to ``path`` on a free loopback port: its base URL."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def receiving(mode: Mode = "ok") -> AsyncIterator[Receiver]:
    receiver = Receiver(mode=mode)
    async with _on_loopback("/hook", receiver.handle) as base:
        receiver.url = f"{base}/hook"
        yield receiver


@dataclass
class Fleet:
    """Many subscriptions' receivers behind one server (``/hook/<name>``), each verifying
    with its own secret and deduplicating by ``webhook-id`` as the Standard Webhooks spec
    asks: ``first`` keeps each event's first delivery per subscription, in arrival order,
    ``duplicates`` counts the deliveries of an id it already had."""

    base: str = ""
    secrets: dict[str, str] = field(default_factory=dict)
    first: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    refused_signatures: int = 0

    def url(self, name: str) -> str:
        return f"{self.base}/hook/{name}"

    def received(self) -> int:
        return sum(len(seen) for seen in self.first.values())

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        raw = await request.read()
        try:
            Webhook(self.secrets[name]).verify(raw, dict(request.headers))
        except Exception:
            self.refused_signatures += 1
            return web.Response(status=401)
        seen = self.first.setdefault(name, {})
        msg_id = request.headers["webhook-id"]
        if msg_id in seen:
            self.duplicates[name] = self.duplicates.get(name, 0) + 1
        else:
            seen[msg_id] = json.loads(raw)
        return web.Response(status=204)


@asynccontextmanager
async def fleet() -> AsyncIterator[Fleet]:
    receivers = Fleet()
    async with _on_loopback("/hook/{name}", receivers.handle) as base:
        receivers.base = base
        yield receivers
