"""A small OpenAI-compatible embeddings endpoint for the tests (``POST /v1/embeddings``).

Its "model" maps each word to a concept (a tiny synonym table) and each concept to one of
``dimension`` axes, so texts sharing no word but a concept get alike vectors: enough to show
that recall follows the endpoint's meaning. ``delay_s`` slows every answer, ``dimension`` can
change between calls, ``calls`` counts them. ``refuse`` answers 413 to any batch holding a
text with that word, ``poison`` maps a word to the bad vector the endpoint gives for it
(``"nan"``, ``"inf"`` or ``"zero"``).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

CONCEPTS = {
    "deploy": "ship", "deploys": "ship", "shipping": "ship", "ship": "ship", "release": "ship",
    "freeze": "halt", "stop": "halt", "halt": "halt", "pause": "halt",
    "friday": "week", "fridays": "week", "weekend": "week",
    "lunch": "food", "cafeteria": "food", "eat": "food", "noon": "food",
    "password": "secret", "credentials": "secret", "rotate": "change", "change": "change",
}


@dataclass
class EmbedServer:
    """The endpoint's live knobs and counters."""

    model: str = "concepts-test"
    dimension: int = 16
    delay_s: float = 0.0
    calls: int = 0
    texts: list[str] = field(default_factory=list)
    url: str = ""
    refuse: str | None = None
    sizes: list[int] = field(default_factory=list)
    poison: dict[str, str] = field(default_factory=dict)
    #: More texts in one request are refused 413 (text-embeddings-inference's
    #: ``max_client_batch_size``, 32 by default).
    max_batch: int | None = None

    def vector(self, text: str) -> list[float]:
        for word, kind in self.poison.items():
            if word in text:
                bad = {"nan": math.nan, "inf": math.inf, "zero": 0.0}[kind]
                return [bad] * self.dimension
        axes = [0.0] * self.dimension
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            concept = CONCEPTS.get(word, word)
            axis = int(hashlib.sha256(concept.encode()).hexdigest(), 16) % self.dimension
            axes[axis] += 1.0
        norm = math.sqrt(sum(x * x for x in axes)) or 1.0
        return [x / norm for x in axes]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)  # the slow embedder under test, not a sync wait
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.texts.extend(texts)
        self.sizes.append(len(texts))
        if self.max_batch is not None and len(texts) > self.max_batch:
            return web.json_response({"error": "batch size too large"}, status=413)
        if self.refuse is not None and any(self.refuse in t for t in texts):
            return web.json_response({"error": "input too large"}, status=413)
        return web.json_response({
            "object": "list", "model": self.model,
            "data": [{"object": "embedding", "index": i, "embedding": self.vector(t)}
                     for i, t in enumerate(texts)],
        })


@asynccontextmanager
async def embed_server(**knobs: object) -> AsyncIterator[EmbedServer]:
    """Serve an :class:`EmbedServer` on a free loopback port for the block."""
    server = EmbedServer(**knobs)  # type: ignore[arg-type]
    app = web.Application()
    app.router.add_post("/v1/embeddings", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server
    finally:
        await runner.cleanup()
