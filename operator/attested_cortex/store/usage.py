"""Bytes an agent stores, for the storage quota and ``quotas.you`` in capabilities: its live
memories' text, title and metadata, its transcripts' frames and metadata until they are
pruned, and what it holds in the spoke-memory tables beside its records (profiles,
candidates, reflections, structured fields, staged import and export chunks: migration
0032, ``spoke``).

:func:`stored` reads the agent's row of ``agent_usage``, which triggers on memories and
transcripts keep in step in every write's transaction (migration 0009): the quota step of a
write costs one primary-key lookup, whatever the agent stores. :func:`recounted` sums the
rows themselves with the same definitions (:data:`.memories.MEMORY_BYTES`,
:data:`.transcripts.OWNED_BYTES`, both the SQL functions the triggers call), for the deep
audit to name a counter that disagrees.

Called by :mod:`attested_cortex.service.pipeline.usage` (stored) and
:mod:`attested_cortex.attest.sweeping` (recounted, inside its snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from attested_cortex.store.database import Conn
from attested_cortex.store.errors import translating
from attested_cortex.store.memories import MEMORY_BYTES
from attested_cortex.store.transcripts import OWNED_BYTES


@dataclass(frozen=True)
class Usage:
    """An agent's stored bytes, by kind."""

    memories: int
    transcripts: int
    spoke: int = 0

    @property
    def total(self) -> int:
        """What the storage quota compares with its limit."""
        return self.memories + self.transcripts + self.spoke


@dataclass(frozen=True)
class Miscount:
    """An agent whose counter row disagrees with the sum of its rows."""

    agent: str
    counted: Usage
    recounted: Usage


async def stored(conn: Conn, *, agent: str) -> Usage:
    """What ``agent`` stores now (memories it authored, transcripts it owns): its counter."""
    cur = await conn.execute("SELECT * FROM agent_usage WHERE agent = %s", (agent,))
    row = await cur.fetchone()
    if row is None:  # never wrote anything that counts
        return Usage(0, 0)
    # ``spoke``: from migration 0032 (a server may run on an older schema)
    return Usage(int(row["memories"]), int(row["transcripts"]), int(row.get("spoke", 0)))


async def recounted(conn: psycopg.AsyncConnection[Any]) -> tuple[int, list[Miscount]]:
    """Every agent's counter against the recomputed sums of its rows: how many agents were
    compared, and those that disagree (an agent without a counter row counts zero)."""
    query = (
        "WITH m AS (SELECT author AS agent, " + MEMORY_BYTES + " AS bytes FROM memories "
        "GROUP BY author), t AS (SELECT owner AS agent, " + OWNED_BYTES + " AS bytes "
        "FROM transcripts GROUP BY owner), p AS (SELECT agent, bytes FROM {spoke}), "
        "sums AS (SELECT coalesce(m.agent, t.agent, p.agent) AS agent, coalesce(m.bytes, 0) AS m, "
        "coalesce(t.bytes, 0) AS t, coalesce(p.bytes, 0) AS p FROM m FULL JOIN t "
        "ON t.agent = m.agent FULL JOIN p ON p.agent = coalesce(m.agent, t.agent)) "
        "SELECT coalesce(s.agent, u.agent) AS agent, coalesce(u.memories, 0) AS counted_m, "
        "coalesce(u.transcripts, 0) AS counted_t, coalesce({counted}, 0) AS counted_p, "
        "coalesce(s.m, 0) AS m, coalesce(s.t, 0) AS t, coalesce(s.p, 0) AS p "
        "FROM sums s FULL JOIN agent_usage u ON u.agent = s.agent ORDER BY 1")
    with translating():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT to_regclass('agent_usage') IS NOT NULL AS present")
        found = await cur.fetchone()
        if found is None or not found["present"]:  # not migrated to 0009 yet: no counters
            return 0, []
        await cur.execute("SELECT to_regprocedure('cortex_spoke_usage()') IS NOT NULL AS p")
        spoke = await cur.fetchone()
        await cur.execute(query.format(  # before migration 0032: no spoke bytes, no column
            spoke="cortex_spoke_usage()" if spoke is not None and spoke["p"]
            else "(SELECT NULL::text, 0::bigint WHERE false) AS nothing(agent, bytes)",
            counted="u.spoke" if spoke is not None and spoke["p"] else "0"))
        rows = await cur.fetchall()
    wrong = [Miscount(str(r["agent"]),
                      Usage(int(r["counted_m"]), int(r["counted_t"]), int(r["counted_p"])),
                      Usage(int(r["m"]), int(r["t"]), int(r["p"])))
             for r in rows
             if (r["counted_m"], r["counted_t"], r["counted_p"]) != (r["m"], r["t"], r["p"])]
    return len(rows), wrong
