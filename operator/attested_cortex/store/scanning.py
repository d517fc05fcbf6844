"""Whole-table scans for the deep audit: memory, link and transcript rows, the spoke-memory
rows it covers (ADR 0067) and write-record events.

Called only by :mod:`attested_cortex.attest.sweeping`, inside one read-only REPEATABLE READ
transaction it opens with :func:`snapshot`, so rows and events come from the same moment and
a write that commits during the sweep is seen entirely or not at all. Each scan streams
through a server-side cursor in batches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import psycopg
from psycopg.rows import dict_row

from attested_cortex.store.errors import translating
from attested_cortex.store.links import COLUMNS as LINK_COLUMNS
from attested_cortex.store.links import Link, link_from_row
from attested_cortex.store.memories import COLUMNS as MEMORY_COLUMNS
from attested_cortex.store.memories import Memory, memory_from_row
from attested_cortex.store.memory_ciphers import cipher_of
from attested_cortex.store.transcripts import RECORD_COLUMNS as TRANSCRIPT_COLUMNS
from attested_cortex.store.transcripts import Recorded, recorded

_BATCH = 2000


async def _fitted(conn: psycopg.AsyncConnection[Any], table: str, select: str,
                  prefix: str = "") -> str:
    """``select`` (a comma-separated column list) with each plain column that ``table``
    lacks read as ``NULL AS column``: the deep audit also checks a database an older build
    wrote (``audit verify --database-url`` before ``migrate``), whose rows have no
    ``written_tier``, ``key_version``... yet; their records name none either. Expressions
    pass unchanged."""
    with translating():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            "SELECT column_name AS name FROM information_schema.columns "
            "WHERE table_name = %s AND table_schema = current_schema()", (table,))
        present = {str(row["name"]) for row in await cur.fetchall()}
    items = []
    for item in (part.strip() for part in select.split(",")):
        if item.isidentifier() and item not in present:
            items.append(f"NULL AS {item}")
        else:
            items.append(f"{prefix}{item}" if item.isidentifier() else item)
    return ", ".join(items)


@asynccontextmanager
async def snapshot(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """One read-only REPEATABLE READ transaction around every scan of a sweep; inside a
    transaction the caller already holds (an import sweeping what it copied in before it
    commits), that transaction's own view."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        yield
        return
    with translating():
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield


async def memories(
    conn: psycopg.AsyncConnection[Any],
) -> AsyncIterator[tuple[Memory, bytes | None]]:
    """Every memory row, tombstones included, with its current revision's agent signature."""
    columns = await _fitted(conn, "memories", MEMORY_COLUMNS, "m.")
    query = (f"SELECT {columns}, s.signature AS agent_signature FROM memories m "
             "LEFT JOIN memory_signatures s ON s.memory_id = m.id AND s.revision = m.revision")
    async for row in _scan(conn, "sweep_memories", query):
        signature = row.pop("agent_signature")
        yield (memory_from_row(row, cipher_of(conn)),
               None if signature is None else bytes(signature))


async def links(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[Link]:
    """Every link row."""
    columns = await _fitted(conn, "links", LINK_COLUMNS)
    async for row in _scan(conn, "sweep_links", f"SELECT {columns} FROM links"):
        yield link_from_row(row)


async def transcripts(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[Recorded]:
    """Every transcript row, with the digest of its frame (hashed by the database, so frames
    never cross the wire); none in a database not migrated to 0008 yet."""
    with translating():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT to_regclass('transcripts') IS NOT NULL AS present")
        found = await cur.fetchone()
    if found is None or not found["present"]:
        return
    query = f"SELECT {await _fitted(conn, 'transcripts', TRANSCRIPT_COLUMNS)} FROM transcripts"
    async for row in _scan(conn, "sweep_transcripts", query):
        yield recorded(row)


async def records(
    conn: psycopg.AsyncConnection[Any], event_types: Sequence[str]
) -> AsyncIterator[tuple[int, str, bytes]]:
    """(sequence, event_type, payload) of the events of ``event_types``, in chain order."""
    query = ("SELECT sequence, event_type, payload FROM signed_events "
             "WHERE event_type = ANY(%s) ORDER BY sequence")
    async for row in _scan(conn, "sweep_records", query, (list(event_types),)):
        yield int(row["sequence"]), str(row["event_type"]), bytes(row["payload"])


#: The spoke-memory tables the deep audit compares (migration 0016), by the kind it names.
SPOKE_TABLES: Final = {"grant": "memory_grants", "receipt": "memory_receipts",
                       "space": "memory_spaces", "subject": "memory_subjects",
                       "candidate": "memory_candidates", "record": "memory_records"}


async def spoke_rows(conn: psycopg.AsyncConnection[Any],
                     kind: str) -> AsyncIterator[dict[str, Any]]:
    """Every row of the spoke-memory table of ``kind``; none before migration 0016."""
    table = SPOKE_TABLES[kind]
    with translating():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (table,))
        found = await cur.fetchone()
    if found is None or not found["present"]:
        return
    async for row in _scan(conn, f"sweep_{table}", f"SELECT * FROM {table}"):
        yield row


async def prefixed_records(
    conn: psycopg.AsyncConnection[Any], prefix: str
) -> AsyncIterator[tuple[int, str, bytes]]:
    """(sequence, event_type, payload) of the events whose type starts with ``prefix``."""
    query = ("SELECT sequence, event_type, payload FROM signed_events "
             "WHERE starts_with(event_type, %s) ORDER BY sequence")
    async for row in _scan(conn, "sweep_prefixed", query, (prefix,)):
        yield int(row["sequence"]), str(row["event_type"]), bytes(row["payload"])


async def _scan(conn: psycopg.AsyncConnection[Any], name: str, query: str,
                params: Any = None) -> AsyncIterator[dict[str, Any]]:
    with translating():
        async with conn.cursor(name, row_factory=dict_row) as cursor:
            await cursor.execute(query, params)
            while rows := await cursor.fetchmany(_BATCH):
                for row in rows:
                    yield row
