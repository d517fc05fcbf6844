"""A client that writes continuously through the real HTTP server and keeps account of every
answer: what the failover tests (tests/server/test_failover.py) check nothing was lost or
written twice by.

Each write has its own ``Idempotency-Key``; a 503 (or a connection the server dropped) is
retried with the same key and body until it is answered, as docs/operator.md tells clients
to ("Failover: what clients see"). Writes cycle through a memory store, then every third
write a link between the last two memories, then every fifth a transcript.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from hack.support.waiting import await_until

from tests.support.cortex import CortexClient, Reply

#: The client's own pause before a retry (it could honour Retry-After: 1; the tests keep the
#: gap measured by the server's recovery, not by the client's patience).
RETRY_PAUSE_S = 0.05
#: A write not answered within this many seconds fails the test (the database never came
#: back, or the server never reconnected).
WRITE_DEADLINE_S = 60.0

TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "failover/**",
                                                "retention_days": 1}]}


@dataclass
class Writer:
    """Writes until :meth:`stop`; what it saw is in its fields."""

    client: CortexClient
    name: str = "w"
    memories: dict[str, str] = field(default_factory=dict)  # content -> acknowledged id
    links: list[str] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    dropped: int = 0  # answers that never came (the server's connection was cut)
    replayed: int = 0
    #: The longest time between two acknowledged writes (the failover's write gap).
    longest_gap_s: float = 0.0
    _stopping: bool = False

    @property
    def acknowledged(self) -> int:
        return len(self.memories) + len(self.links) + len(self.transcripts)

    def stop(self) -> None:
        """Finish the write in flight (until it is answered), then return."""
        self._stopping = True

    async def run(self) -> None:
        last = time.monotonic()
        count = 0
        while not self._stopping:
            count += 1
            await self._one(count)
            now = time.monotonic()
            self.longest_gap_s = max(self.longest_gap_s, now - last)
            last = now

    async def _one(self, count: int) -> None:
        content = f"{self.name}-memory-{count}"
        reply = await self.until_answered("POST", "/v1/memories",
                                          {"namespace": "failover/w", "content": content},
                                          key=f"{self.name}-{count}")
        self.memories[content] = reply.body["id"]
        if count % 3 == 0 and len(self.memories) >= 2:
            *_, src, dst = self.memories.values()
            link = await self.until_answered(
                "POST", "/v1/links", {"src_id": src, "dst_id": dst, "relation": "related_to"},
                key=f"{self.name}-{count}-link")
            self.links.append(link.body["id"])
        if count % 5 == 0:
            transcript = await self.until_answered(
                "POST", "/v1/transcripts",
                {"namespace": "failover/w", "content": f"user: {content}?\nagent: kept.\n"},
                key=f"{self.name}-{count}-transcript")
            self.transcripts.append(transcript.body["id"])

    async def until_answered(self, method: str, path: str, body: Any, *, key: str) -> Reply:
        """Send until the answer is not a 503 (then it must be a 201), every
        :data:`RETRY_PAUSE_S`, for at most :data:`WRITE_DEADLINE_S`."""

        async def attempt() -> Reply | None:
            try:
                reply = await self.client.call(method, path, body,
                                               headers={"Idempotency-Key": key})
            except aiohttp.ClientError:
                self.dropped += 1
                return None
            self.statuses[reply.status] += 1
            if reply.status == 503:
                assert reply.headers["Retry-After"] == "1", reply.headers
                return None
            assert reply.status == 201, reply.text
            self.replayed += reply.headers.get("Idempotent-Replayed") == "true"
            return reply

        return await await_until(attempt, seconds=WRITE_DEADLINE_S, interval_s=RETRY_PAUSE_S,
                                 what=f"{path} answered with something else than 503")
