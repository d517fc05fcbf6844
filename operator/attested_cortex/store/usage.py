"""Bytes an agent stores, for the storage quota and ``quotas.you`` in capabilities: its live
memories' text, title and metadata, and its transcripts' frames and metadata until they are
pruned. One statement, so the quota step of every write costs one round trip.

Called by :mod:`attested_cortex.service.usage`. The two sums are defined next to their tables
(:data:`.memories.MEMORY_BYTES`, :data:`.transcripts.OWNED_BYTES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from attested_cortex.store.database import Conn
from attested_cortex.store.memories import MEMORY_BYTES
from attested_cortex.store.transcripts import OWNED_BYTES


@dataclass(frozen=True)
class Usage:
    """An agent's stored bytes, by kind."""

    memories: int
    transcripts: int

    @property
    def total(self) -> int:
        """What the storage quota compares with its limit."""
        return self.memories + self.transcripts


async def stored(conn: Conn, *, agent: str) -> Usage:
    """What ``agent`` stores now (memories it authored, transcripts it owns)."""
    cur = await conn.execute(
        f"SELECT (SELECT {MEMORY_BYTES} FROM memories WHERE author = %s "
        "AND deleted_at IS NULL) AS memories, "
        f"(SELECT {OWNED_BYTES} FROM transcripts WHERE owner = %s) AS transcripts",
        (agent, agent))
    row = await cur.fetchone()
    assert row is not None
    return Usage(int(row["memories"]), int(row["transcripts"]))
