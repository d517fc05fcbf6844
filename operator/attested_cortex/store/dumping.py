"""SQL of the logical backup path: tables copied out as COPY text rows in one snapshot, and
copied into an empty database in one transaction. No bundle format and no crypto here.

Called only by :mod:`attested_cortex.bundles.exporting` and
:mod:`attested_cortex.bundles.importing`, which pass the table names, columns and session
settings (the bundle format lives above the store). Every psycopg error is translated.

The import writes ``signed_events`` rows as they were: the chain trigger of migration 0006
would renumber and rehash every event, so it is disabled for the import's transaction (an
``ALTER TABLE`` is transactional: a rollback re-enables it, a commit does so explicitly
first) and the bundle's chain is verified in Python before any of it is copied. Only the
table's owner (the migrating role) may do that; the server's role cannot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from attested_cortex.store.errors import translating
from attested_cortex.store.memories import COLUMNS as MEMORY_COLUMNS
from attested_cortex.store.memories import Memory, memory_from_row
from attested_cortex.store.memory_ciphers import cipher_of

AnyConn = psycopg.AsyncConnection[Any]
_CHAIN_TRIGGER = "signed_events_extends_head"
#: The ``cortex_decisions`` row of a restore from a bundle that did not carry everything.
RESTORE_INCOMPLETE = "restore.incomplete"


@asynccontextmanager
async def owner_connection(dsn: str) -> AsyncIterator[AnyConn]:
    """One autocommit connection outside any pool (the CLI's; the import's runs as the
    migrating role and opens its one transaction itself)."""
    with translating():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            yield conn


async def configure(conn: AnyConn, settings: Sequence[tuple[str, str]]) -> None:
    """Settings for exact COPY text (the same on both ends), and no statement timeout: a
    whole-table COPY of a large cortex runs longer than a request. Local to the caller's
    transaction, so a pooled connection goes back to the pool as it came."""
    with translating():
        for name, value in (*settings, ("statement_timeout", "0")):
            await conn.execute("SELECT set_config(%s, %s, true)", (name, value))


async def copy_out(conn: AnyConn, table: str, columns: Sequence[str],
                   order_by: str) -> AsyncIterator[bytes]:
    """Every row of ``table`` as one COPY text line, in ``order_by`` order."""
    query = sql.SQL("COPY (SELECT {} FROM {} ORDER BY {}) TO STDOUT").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table),
        sql.SQL(order_by))
    with translating():
        async with conn.cursor().copy(query) as copy:
            async for row in copy:
                yield bytes(row)


async def copy_in(conn: AnyConn, table: str, columns: Sequence[str], data: bytes) -> None:
    """Append COPY text rows to ``table``."""
    query = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))
    with translating():
        async with conn.cursor().copy(query) as copy:
            await copy.write(data)


async def stored_columns(conn: AnyConn) -> dict[str, list[str]]:
    """Every base table of the cortex's schema with its stored columns (generated ones
    left out: the target computes them), in column order."""
    with translating():
        # the catalog, not information_schema: it lists tables the role may not read too
        cur = await conn.execute(
            "SELECT c.relname, a.attname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = c.oid"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
            " AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped"
            " AND a.attgenerated = '' ORDER BY c.relname, a.attnum")
        found: dict[str, list[str]] = {}
        for table, column in await cur.fetchall():
            found.setdefault(str(table), []).append(str(column))
    return found


async def mark_incomplete(conn: AnyConn, omitted: dict[str, list[str]]) -> None:
    """Record in the target that it was restored from a bundle that did not carry
    ``omitted`` (ADR 0085): the deep audit reads it (:func:`restore_omissions`), so a
    partial restore never verifies."""
    with translating():
        await conn.execute(
            "INSERT INTO cortex_decisions (name, value) VALUES (%s, %s)"
            " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            (RESTORE_INCOMPLETE, Jsonb(omitted)))


async def list_to_adopt(conn: AnyConn) -> None:
    """List every record side row in migration 0032's ``spoke_records_to_adopt``, so the
    target's first start covers them (a bundle of a build before the ``record`` kind, ADR
    0087); before migration 0032 nothing (the migration lists them when it runs)."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT to_regclass('spoke_records_to_adopt') IS NOT NULL")
        present = await cur.fetchone()
        if present is not None and present[0]:
            await conn.execute("INSERT INTO spoke_records_to_adopt (memory_id)"
                               " SELECT memory_id FROM memory_records ON CONFLICT DO NOTHING")


async def restore_omissions(conn: AnyConn) -> dict[str, list[str]] | None:
    """What the bundle this database was restored from did not carry, or None (restored
    whole, or never restored from a bundle)."""
    with translating():
        cur = await conn.execute("SELECT to_regclass('cortex_decisions') IS NOT NULL AS t")
        present = await cur.fetchone()
        if present is None or not (present["t"] if isinstance(present, dict) else present[0]):
            return None  # a schema before migration 0028: never marked
        cur = await conn.execute("SELECT value FROM cortex_decisions WHERE name = %s",
                                 (RESTORE_INCOMPLETE,))
        row = await cur.fetchone()
    if row is None:
        return None
    value = row["value"] if isinstance(row, dict) else row[0]
    return {str(k): [str(c) for c in v] for k, v in dict(value).items()}


async def occupied(conn: AnyConn, tables: Sequence[str]) -> list[str]:
    """The tables among ``tables`` that hold at least one row."""
    found = []
    with translating():
        for table in tables:
            cur = await conn.execute(
                sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(table)))
            row = await cur.fetchone()
            if row is not None and row[0]:
                found.append(table)
    return found


async def chain_tip(conn: AnyConn) -> tuple[int, str | None]:
    """How many events the chain holds and the hex hash of its last one (None: empty)."""
    with translating():
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM signed_events), "
            "(SELECT hash FROM signed_events ORDER BY sequence DESC LIMIT 1)")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), (bytes(row[1]).hex() if row[1] is not None else None)


async def chain_trigger(conn: AnyConn, *, enabled: bool) -> None:
    """Switch the chain's insert trigger off for a verified import, and back on (ALWAYS)."""
    action = "ENABLE ALWAYS" if enabled else "DISABLE"
    with translating():
        await conn.execute(sql.SQL("ALTER TABLE signed_events {} TRIGGER {}").format(
            sql.SQL(action), sql.Identifier(_CHAIN_TRIGGER)))


async def clear_usage(conn: AnyConn) -> None:
    """Drop the counters the usage triggers just made, so the bundle's are copied in as
    they were at the source (the deep audit recounts them against the rows)."""
    with translating():
        await conn.execute("DELETE FROM agent_usage")


async def signed_memories(
    conn: AnyConn,
) -> AsyncIterator[tuple[Memory, bytes, str, datetime]]:
    """Each memory whose current revision is agent-signed, with that signature, its signer
    and when it was signed."""
    columns = ", ".join(f"m.{c.strip()}" for c in MEMORY_COLUMNS.split(","))
    query = (f"SELECT {columns}, s.signature AS sig, s.signed_by AS sig_by, "
             "s.signed_at AS sig_at FROM memories m JOIN memory_signatures s "
             "ON s.memory_id = m.id AND s.revision = m.revision ORDER BY m.id")
    with translating():
        async with conn.cursor("signed_memories", row_factory=dict_row) as cursor:
            await cursor.execute(query)
            while rows := await cursor.fetchmany(2000):
                for row in rows:
                    signature, by, at = row.pop("sig"), row.pop("sig_by"), row.pop("sig_at")
                    yield (memory_from_row(row, cipher_of(conn)), bytes(signature), str(by),
                           at)
