"""Memory rows moved to the current master key version and token form (ADR 0056 item 6,
ADR 0065, ADR 0078).

Called by :class:`attested_cortex.service.workers.resealing.Resealer` only, inside one
transaction per batch: :func:`to_reseal` locks at most ``limit`` live rows sealed under an
older version (and, when sealing, plain ones) ``FOR UPDATE SKIP LOCKED``, opened with the
connection's cipher; :func:`reseal` writes each row's new sealed value, key version and
keyed search vector in one UPDATE, so a reader sees a row wholly before or wholly after.
Neither revision nor ``updated_at`` moves: the memory did not change, and its write record
(digests of the opened text) still matches it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from attested_cortex.store.database import Conn
from attested_cortex.store.memories import COLUMNS, Memory, memory_from_row, stored_values
from attested_cortex.store.memory_ciphers import LEGACY_ROWS, cipher_of, lexemes


async def sealed_counts(conn: Conn) -> dict[int | None, int]:
    """Live memories by the key version they are sealed under (None: plain)."""
    cur = await conn.execute("SELECT key_version, count(*) AS n FROM memories "
                             "WHERE deleted_at IS NULL GROUP BY key_version")
    return {row["key_version"]: int(row["n"]) for row in await cur.fetchall()}


async def legacy_tokens_held(conn: Conn) -> int:
    """Live sealed memories whose search vectors still hold legacy tokens (ADR 0078; the
    partial index of migration 0027 holds exactly these)."""
    cur = await conn.execute(f"SELECT count(*) AS n FROM memories WHERE {LEGACY_ROWS}")
    row = await cur.fetchone()
    return 0 if row is None else int(row["n"])


async def searches_unlike_text(conn: Conn, memories: Sequence[Memory]) -> list[uuid.UUID]:
    """Those of ``memories`` (live, sealed, opened on ``conn``) whose stored search vector
    is not the one their text gives under their key version (issue 37 item 13): blind
    tokens copied from another memory make recall return this one for the other's words,
    and no write record covers them, so the deep audit re-derives them. Rows still holding
    legacy tokens (ADR 0078) are left to the re-sealer. Empty without a cipher."""
    cipher = cipher_of(conn)
    sealed = [m for m in memories if m.key_version is not None and not m.unreadable
              and not m.deleted]
    if cipher is None or not sealed:
        return []
    found = await lexemes(conn, [(m.title, m.content, m.tags) for m in sealed])
    expected = [cipher.key_text(text, int(m.key_version or 0))
                for m, text in zip(sealed, found, strict=True)]
    cur = await conn.execute(
        "SELECT m.id FROM memories m JOIN unnest(%s::uuid[], %s::text[]) AS n(id, search)"
        " ON m.id = n.id WHERE m.token_format <> 0"
        " AND m.search IS DISTINCT FROM n.search::tsvector ORDER BY m.id",
        ([m.id for m in sealed], expected))
    return [row["id"] for row in await cur.fetchall()]


async def to_reseal(conn: Conn, *, current: int, plain: bool, limit: int,
                    skip: Sequence[uuid.UUID] = ()) -> list[Memory]:
    """At most ``limit`` live memories sealed under a version older than ``current``, or
    under ``current`` with legacy tokens (ADR 0078: re-keyed in the current form), and,
    ``plain``, not sealed; opened, locked until the caller's transaction ends; never a
    newer version (a replica not restarted with the new ring leaves them alone)."""
    cur = await conn.execute(
        f"SELECT {COLUMNS} FROM memories WHERE deleted_at IS NULL "
        "AND (key_version < %s OR (key_version = %s AND token_format = 0) "
        "OR (%s AND key_version IS NULL)) AND id <> ALL(%s) "
        "ORDER BY key_version NULLS FIRST, id LIMIT %s FOR UPDATE SKIP LOCKED",
        (current, current, plain, list(skip), limit))
    cipher = cipher_of(conn)
    return [memory_from_row(row, cipher) for row in await cur.fetchall()]


async def reseal(conn: Conn, memories: Sequence[Memory]) -> list[Memory]:
    """Seal these memories (locked by :func:`to_reseal`, opened) under the connection's
    current version, with their keyed search vectors, in one statement; the rows as now
    stored (what their ``memory.resealed`` records cover)."""
    if not memories:
        return []
    values = await stored_values(
        conn, [(m.id, m.title, m.content, m.tags, m.metadata) for m in memories])
    cur = await conn.execute(
        "UPDATE memories m SET title = '', content = '', metadata = '{}'::jsonb, "
        "key_version = n.version, sealed = n.sealed, search = n.search::tsvector "
        "FROM unnest(%s::uuid[], %s::int[], %s::bytea[], %s::text[]) "
        "AS n(id, version, sealed, search) WHERE m.id = n.id RETURNING "
        + ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(",")),
        ([m.id for m in memories], [v.key_version for v in values],
         [v.sealed for v in values], [v.search for v in values]))
    cipher = cipher_of(conn)
    return [memory_from_row(row, cipher) for row in await cur.fetchall()]
