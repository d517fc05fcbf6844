"""Spoke-memory transfer rows (migration 0018): exports and their chunks, staged imports
and theirs. Called by the service's ``spoke_transfer`` only; dict rows.

A chunk holds records as written (a space bundle is for another provider or cortex, ADR
0070), so with memories sealed at rest (a sealing cipher on the connection, ADR 0065) its
``data`` is kept sealed under the ``memory`` subkey of ``key_version`` (migration 0025),
bound to an id derived from its export or import and ordinal, and opened as it is read; the
digests stay those of the plain chunk (the wire's).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from attested_cortex.errors import ConflictError
from attested_cortex.store.database import Conn
from attested_cortex.store.memory_ciphers import open_value, seal_value

Row = dict[str, Any]


def chunk_id(kind: str, owner: uuid.UUID, ordinal: int) -> uuid.UUID:
    """The id a sealed chunk is bound to: ``kind`` ``export`` or ``import``, its owner's id
    and its ordinal (never a memory's id, never the other kind's)."""
    return uuid.uuid5(owner, f"spoke-transfer-{kind}-chunk\0{ordinal}")


def _sealed(conn: Conn, kind: str, owner: uuid.UUID, ordinal: int,
            data: bytes) -> tuple[bytes, int | None]:
    kept = seal_value(conn, chunk_id(kind, owner, ordinal), data)
    return (data, None) if kept is None else kept


def _opened(conn: Conn, kind: str, owner: uuid.UUID, row: Row) -> Row:
    if row.get("key_version") is None:
        return row
    plain = open_value(conn, chunk_id(kind, owner, row["ordinal"]), row["key_version"],
                       bytes(row["data"]))
    if plain is None:
        raise ConflictError(f"{kind} chunk {row['ordinal']} is sealed under key version "
                            f"{row['key_version']}, which the master key ring no longer holds",
                            code="chunk_unreadable")
    return {**row, "data": plain}


async def insert_export(conn: Conn, row: Row, chunks: Sequence[tuple[bytes, str]]) -> None:
    """An export and its chunks (``(data, digest)`` in ordinal order); ``grants_digest``:
    the creator's live grants it was built under (None: built by the authority)."""
    await conn.execute(
        "INSERT INTO memory_exports (export_id, space_id, chunk_count, manifest_digest,"
        " authority_generation, created_by, grants_digest) VALUES (%(export_id)s,"
        " %(space_id)s, %(chunk_count)s, %(manifest_digest)s, %(authority_generation)s,"
        " %(created_by)s, %(grants_digest)s)", row)
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO memory_export_chunks (export_id, ordinal, data, key_version, digest)"
            " VALUES (%s, %s, %s, %s, %s)",
            [(row["export_id"], i, *_sealed(conn, "export", row["export_id"], i, data), digest)
             for i, (data, digest) in enumerate(chunks)])


async def export_chunk(conn: Conn, space_id: str, export_id: uuid.UUID,
                       ordinal: int) -> Row | None:
    """One chunk of an export of ``space_id`` with its export's row, or None."""
    cur = await conn.execute(
        "SELECT e.*, c.ordinal, c.data, c.key_version, c.digest FROM memory_exports e JOIN"
        " memory_export_chunks c USING (export_id) WHERE e.space_id = %s"
        " AND e.export_id = %s AND c.ordinal = %s", (space_id, export_id, ordinal))
    row = await cur.fetchone()
    return None if row is None else _opened(conn, "export", export_id, row)


async def staged(conn: Conn, space_id: str, import_id: uuid.UUID) -> Row | None:
    """An import into ``space_id``, locked, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_imports WHERE space_id = %s AND import_id = %s FOR UPDATE",
        (space_id, import_id))
    return await cur.fetchone()


async def begin_import(conn: Conn, space_id: str, import_id: uuid.UUID, by: str) -> Row:
    """A new import in staging (its first chunk is being staged)."""
    cur = await conn.execute(
        "INSERT INTO memory_imports (import_id, space_id, created_by) VALUES (%s, %s, %s)"
        " RETURNING *", (import_id, space_id, by))
    row = await cur.fetchone()
    assert row is not None
    return row


async def stage_chunk(conn: Conn, import_id: uuid.UUID, ordinal: int, data: bytes,
                      digest: str) -> None:
    """Stage one chunk and advance the import's next ordinal."""
    await conn.execute(
        "INSERT INTO memory_import_chunks (import_id, ordinal, data, key_version, digest)"
        " VALUES (%s, %s, %s, %s, %s)",
        (import_id, ordinal, *_sealed(conn, "import", import_id, ordinal, data), digest))
    await conn.execute("UPDATE memory_imports SET next_ordinal = next_ordinal + 1"
                       " WHERE import_id = %s", (import_id,))


async def staged_bytes(conn: Conn, import_id: uuid.UUID, agent: str) -> tuple[int, int]:
    """The bytes staged (as stored) by the import and by all of ``agent``'s imports not yet
    activated or discarded. Takes the agent's staging lock first (to the transaction's
    end), so two chunks staged at once by one agent are counted one after the other."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                       ("spoke-staged:" + agent,))
    cur = await conn.execute(
        "SELECT coalesce(sum(octet_length(c.data)) FILTER (WHERE i.import_id = %s), 0)"
        " AS import, coalesce(sum(octet_length(c.data)), 0) AS agent"
        " FROM memory_imports i JOIN memory_import_chunks c USING (import_id)"
        " WHERE i.created_by = %s AND i.state IN ('staging', 'verified')",
        (import_id, agent))
    row = await cur.fetchone()
    assert row is not None
    return int(row["import"]), int(row["agent"])


async def staged_chunks(conn: Conn, import_id: uuid.UUID) -> list[Row]:
    """An import's staged chunks in ordinal order."""
    cur = await conn.execute(
        "SELECT ordinal, data, key_version, digest FROM memory_import_chunks"
        " WHERE import_id = %s ORDER BY ordinal", (import_id,))
    return [_opened(conn, "import", import_id, row) for row in await cur.fetchall()]


async def set_import(conn: Conn, import_id: uuid.UUID, *, state: str,
                     manifest_digest: str | None = None) -> None:
    """An import's new state (a discard also drops its staged chunks)."""
    await conn.execute(
        "UPDATE memory_imports SET state = %s,"
        " manifest_digest = coalesce(%s, manifest_digest) WHERE import_id = %s",
        (state, manifest_digest, import_id))
    if state == "discarded":
        await conn.execute("DELETE FROM memory_import_chunks WHERE import_id = %s",
                           (import_id,))


async def expire(conn: Conn, *, staged_before: datetime, exported_before: datetime
                 ) -> tuple[int, int]:
    """Expire what transfers left behind (issue 37 item 16): imports still staging or
    verified, created before ``staged_before``, are discarded (their chunks dropped, as a
    discard does); exports created before ``exported_before`` are dropped with their chunks.
    How many imports and exports went."""
    cur = await conn.execute(
        "UPDATE memory_imports SET state = 'discarded' WHERE state IN ('staging', 'verified')"
        " AND created_at < %s RETURNING import_id", (staged_before,))
    imports = [row["import_id"] for row in await cur.fetchall()]
    if imports:
        await conn.execute("DELETE FROM memory_import_chunks WHERE import_id = ANY(%s)",
                           (imports,))
    cur = await conn.execute("SELECT export_id FROM memory_exports WHERE created_at < %s"
                             " FOR UPDATE", (exported_before,))
    exports = [row["export_id"] for row in await cur.fetchall()]
    if exports:
        # chunks first, in a statement of their own: the usage trigger (migration 0032)
        # finds each chunk's creator through its export row when that statement ends
        await conn.execute("DELETE FROM memory_export_chunks WHERE export_id = ANY(%s)",
                           (exports,))
        await conn.execute("DELETE FROM memory_exports WHERE export_id = ANY(%s)", (exports,))
    return len(imports), len(exports)


async def count_records(conn: Conn, space_id: str) -> int:
    """How many records (tombstones included) a space holds."""
    cur = await conn.execute("SELECT count(*) AS n FROM memory_records WHERE space_id = %s",
                             (space_id,))
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def bump_generation(conn: Conn, space_id: str) -> int:
    """The space's next authority generation (an activated import), and its revision."""
    cur = await conn.execute(
        "UPDATE memory_spaces SET authority_generation = authority_generation + 1,"
        " revision = revision + 1 WHERE space_id = %s RETURNING authority_generation",
        (space_id,))
    row = await cur.fetchone()
    assert row is not None
    return int(row["authority_generation"])
