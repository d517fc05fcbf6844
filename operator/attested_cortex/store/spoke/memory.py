"""The spoke-memory family's rows (migration 0016, ADR 0060): spaces, subjects, grants, the
side rows of retained records and receipts. Called by the service's ``spoke_*`` modules only;
every function takes a connection the caller holds (inside its transaction for writes) and
returns dict rows, which the service turns into wire models.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg
from psycopg.types.json import Jsonb

from attested_cortex.errors import ConflictError
from attested_cortex.store.database import Conn
from attested_cortex.store.memory_ciphers import cipher_of, open_row

Row = dict[str, Any]

#: The code of a receipt key another request took first (the caller re-reads it).
RECEIPT_TAKEN = "receipt_key_taken"


async def ensure_space(conn: Conn, space_id: str, created_by: str) -> Row:
    """The space's row, created on first use (ADR 0060 §1), locked for this transaction."""
    await conn.execute(
        "INSERT INTO memory_spaces (space_id, created_by) VALUES (%s, %s)"
        " ON CONFLICT (space_id) DO NOTHING", (space_id, created_by))
    found = await space(conn, space_id, lock=True)
    assert found is not None
    return found


async def space(conn: Conn, space_id: str, *, lock: bool = False) -> Row | None:
    """One space with its computed ``pending_receipts``; ``lock``: FOR UPDATE (writes)."""
    cur = await conn.execute(
        "SELECT s.*, (SELECT count(*) FROM memory_receipts r WHERE r.space_id = s.space_id"
        " AND r.status = 'pending') AS pending_receipts FROM memory_spaces s"
        " WHERE s.space_id = %s" + (" FOR UPDATE OF s" if lock else ""), (space_id,))
    return await cur.fetchone()


async def spaces(conn: Conn) -> list[Row]:
    """Every space, by id, with its pending receipts (the caller filters what it may see)."""
    cur = await conn.execute(
        "SELECT s.*, (SELECT count(*) FROM memory_receipts r WHERE r.space_id = s.space_id"
        " AND r.status = 'pending') AS pending_receipts FROM memory_spaces s"
        " ORDER BY s.space_id")
    return list(await cur.fetchall())


async def set_frozen(conn: Conn, space_id: str, frozen: bool) -> Row:
    """Freeze or unfreeze, bumping the space's revision."""
    await conn.execute(
        "UPDATE memory_spaces SET frozen = %s, revision = revision + 1 WHERE space_id = %s",
        (frozen, space_id))
    found = await space(conn, space_id)
    assert found is not None
    return found


async def bump_space(conn: Conn, space_id: str) -> None:
    """A new space revision for a change of its grants (listing cursors bind it)."""
    await conn.execute("UPDATE memory_spaces SET revision = revision + 1 WHERE space_id = %s",
                       (space_id,))


async def ensure_subject(conn: Conn, space_id: str, subject_id: str,
                         kind: str | None) -> tuple[Row, bool]:
    """The subject's row and whether this call created it."""
    cur = await conn.execute(
        "INSERT INTO memory_subjects (space_id, subject_id, kind) VALUES (%s, %s, %s)"
        " ON CONFLICT (space_id, subject_id) DO NOTHING RETURNING *",
        (space_id, subject_id, kind))
    made = await cur.fetchone()
    if made is not None:
        return made, True
    found = await subject(conn, space_id, subject_id, lock=True)
    assert found is not None
    return found, False


async def subject(conn: Conn, space_id: str, subject_id: str, *,
                  lock: bool = False) -> Row | None:
    """One subject, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_subjects WHERE space_id = %s AND subject_id = %s"
        + (" FOR UPDATE" if lock else ""), (space_id, subject_id))
    return await cur.fetchone()


async def set_subject(conn: Conn, space_id: str, subject_id: str, *, state: str,
                      fenced: Sequence[str]) -> Row:
    """A subject's new state and fenced contexts, bumping its revision."""
    cur = await conn.execute(
        "UPDATE memory_subjects SET state = %s, fenced_context_ids = %s,"
        " revision = revision + 1 WHERE space_id = %s AND subject_id = %s RETURNING *",
        (state, list(fenced), space_id, subject_id))
    row = await cur.fetchone()
    assert row is not None
    return row


async def insert_grant(conn: Conn, grant: Row) -> Row:
    """Store a new grant (``grant``: its columns; ``derived_from``: its parent, None when
    the authority issued it)."""
    cur = await conn.execute(
        "INSERT INTO memory_grants (grant_id, space_id, principal_id, issued_by, capabilities,"
        " subject_ids, context_ids, shared_access, expires_at, derived_from) VALUES"
        " (%(grant_id)s, %(space_id)s, %(principal_id)s, %(issued_by)s, %(capabilities)s,"
        " %(subject_ids)s, %(context_ids)s, %(shared_access)s, %(expires_at)s,"
        " %(derived_from)s) RETURNING *", grant)
    row = await cur.fetchone()
    assert row is not None
    return row


async def grants(conn: Conn, space_id: str, principal_id: str | None = None) -> list[Row]:
    """The grants of a space (of one principal when named), oldest first."""
    cur = await conn.execute(
        "SELECT * FROM memory_grants WHERE space_id = %s"
        " AND (%s::text IS NULL OR principal_id = %s) ORDER BY created_at, grant_id",
        (space_id, principal_id, principal_id))
    return list(await cur.fetchall())


async def grant(conn: Conn, space_id: str, grant_id: uuid.UUID, *,
                lock: bool = False) -> Row | None:
    """One grant of a space, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_grants WHERE space_id = %s AND grant_id = %s"
        + (" FOR UPDATE" if lock else ""), (space_id, grant_id))
    return await cur.fetchone()


#: The grant and every grant derived from it, down the issuance chain (through grants
#: already revoked: one derived before a cascade existed may still be live).
_CHAIN = """
WITH RECURSIVE chain AS (
    SELECT grant_id, 0 AS depth FROM memory_grants WHERE grant_id = %(grant)s
    UNION
    SELECT g.grant_id, c.depth + 1 FROM memory_grants g JOIN chain c
        ON g.derived_from = c.grant_id WHERE c.depth < 1000
), at AS (SELECT clock_timestamp() AS now)
UPDATE memory_grants g SET revoked_at = at.now FROM chain, at
WHERE g.grant_id = chain.grant_id AND g.revoked_at IS NULL
RETURNING g.grant_id, chain.depth, g.created_at
"""


async def revoke(conn: Conn, grant_id: uuid.UUID) -> list[uuid.UUID]:
    """Revoke a live grant and every live grant derived from it (ADR 0082), terminally, at
    one time: their ids, the grant's first, then down the chain."""
    cur = await conn.execute(_CHAIN, {"grant": grant_id})
    found = sorted(await cur.fetchall(), key=lambda r: (r["depth"], r["created_at"]))
    return [row["grant_id"] for row in found]


#: A record's columns: its side row and, from its memory row, text, author, revision, times
#: and tombstone (what :func:`~attested_cortex.service.resources.spoke.views.record_view`
#: reads). Shared with :mod:`.reading`.
RECORD = ("r.memory_id, r.space_id, r.subject_id, r.kind, r.context_id, r.source_context_id,"
          " r.captured_by, r.candidate_id, r.structured, r.cognition, r.schema_version,"
          " r.extensions, m.content AS text, m.author, m.revision, m.created_at,"
          " m.updated_at, m.deleted_at")
#: :data:`RECORD` with the memory's sealed value, which :func:`opened` opens (ADR 0065).
SEALED_RECORD = RECORD + ", m.key_version AS sealed_version, m.sealed"


def opened(conn: Conn, row: Row | None) -> Row | None:
    """A record row with its memory's text opened when it is sealed (ADR 0065); the sealed
    columns dropped."""
    if row is None:
        return None
    version, sealed = row.pop("sealed_version"), row.pop("sealed")
    if version is not None:
        row["text"] = open_row(cipher_of(conn), {
            "id": row["memory_id"], "key_version": version, "sealed": sealed}).content
    return row


async def insert_record(conn: Conn, row: Row) -> None:
    """The side row of a record whose memory row this transaction just inserted (with the
    memory's creation time, revision and tombstone: migration 0023, whose trigger keeps the
    last two equal to the memory's from then on)."""
    await conn.execute(
        "INSERT INTO memory_records (memory_id, space_id, subject_id, kind, context_id,"
        " source_context_id, captured_by, candidate_id, structured, cognition, created_at,"
        " revision, deleted_at) SELECT %(memory_id)s, %(space_id)s, %(subject_id)s, %(kind)s,"
        " %(context_id)s, %(source_context_id)s, %(captured_by)s, %(candidate_id)s,"
        " %(structured)s, %(cognition)s, m.created_at, m.revision, m.deleted_at"
        " FROM memories m WHERE m.id = %(memory_id)s",
        {**row, "structured": _json(row["structured"]), "cognition": _json(row["cognition"])})


#: The caller's grants in the space, as JSON objects (one statement with a record read).
_GRANTS = ("(SELECT coalesce(jsonb_agg(to_jsonb(g) ORDER BY g.created_at, g.grant_id),"
           " '[]'::jsonb) FROM memory_grants g WHERE g.space_id = %(space)s"
           " AND g.principal_id = %(principal)s)")


async def record_rows(conn: Conn, space_id: str,
                      ids: Sequence[uuid.UUID] | None = None) -> list[Row]:
    """The side rows of a space's records (of ``ids`` only, when given), as stored: what
    an op record covers (:func:`attested_cortex.attest.spoke_records.record_record`)."""
    cur = await conn.execute(
        "SELECT * FROM memory_records WHERE space_id = %s"
        " AND (%s::uuid[] IS NULL OR memory_id = ANY(%s::uuid[])) ORDER BY memory_id",
        (space_id, None if ids is None else list(ids), None if ids is None else list(ids)))
    return list(await cur.fetchall())


async def take_to_adopt(conn: Conn) -> list[Row]:
    """Empty migration 0032's list of record rows written before op records covered them;
    the side rows it named (locked by the DELETE until the caller's transaction ends: a
    second server waits, then finds the list empty). None before migration 0032."""
    cur = await conn.execute("SELECT to_regclass('spoke_records_to_adopt') IS NOT NULL AS p")
    present = await cur.fetchone()
    if present is None or not present["p"]:
        return []
    cur = await conn.execute(
        "WITH gone AS (DELETE FROM spoke_records_to_adopt RETURNING memory_id)"
        " SELECT r.* FROM memory_records r JOIN gone USING (memory_id)"
        " ORDER BY r.space_id, r.memory_id")
    return list(await cur.fetchall())


async def record_and_grants(conn: Conn, space_id: str, record_id: uuid.UUID,
                            principal: str) -> Row | None:
    """One record of a space with ``principal``'s grants there (``grants``: JSON objects,
    oldest first), in one statement: the read and its authorization's input in one round
    trip (``memory.records.get``). None when the space holds no such record."""
    cur = await conn.execute(
        f"SELECT {SEALED_RECORD}, {_GRANTS} AS grants FROM memory_records r"
        " JOIN memories m ON m.id = r.memory_id"
        " WHERE r.space_id = %(space)s AND r.memory_id = %(record)s",
        {"space": space_id, "record": record_id, "principal": principal})
    return opened(conn, await cur.fetchone())


async def space_and_grants(conn: Conn, space_id: str,
                           principal: str) -> tuple[Row | None, list[Row]]:
    """A space's row (None: no such space; without ``pending_receipts``, which reads
    receipts) and ``principal``'s grants there, oldest first, in one statement (what a read
    checks before it reads)."""
    cur = await conn.execute(
        f"SELECT {_GRANTS} AS grants, s.* FROM (SELECT 1) one LEFT JOIN memory_spaces s"
        " ON s.space_id = %(space)s",
        {"space": space_id, "principal": principal})
    row = await cur.fetchone()
    assert row is not None
    grants = row.pop("grants")
    return (row if row["space_id"] is not None else None), grants


async def record(conn: Conn, space_id: str, record_id: uuid.UUID, *,
                 lock: bool = False) -> Row | None:
    """One record of a space (side row joined with its memory), or None."""
    cur = await conn.execute(
        f"SELECT {SEALED_RECORD} FROM memory_records r JOIN memories m ON m.id = r.memory_id"
        " WHERE r.space_id = %s AND r.memory_id = %s"
        + (" FOR UPDATE OF r, m" if lock else ""), (space_id, record_id))
    return opened(conn, await cur.fetchone())


async def record_gate(conn: Conn, memory_id: uuid.UUID) -> Row | None:
    """What a native write of memory ``memory_id`` must honour when it is a spoke record
    (its subject's state and fences, its placement, its space's freeze; None: not a
    record). Locks the subject's row, as the family's own writes do."""
    cur = await conn.execute(
        "SELECT s.subject_id, s.state, s.fenced_context_ids, r.context_id, sp.frozen,"
        " sp.space_id FROM memory_records r JOIN memory_subjects s USING (space_id, subject_id)"
        " JOIN memory_spaces sp USING (space_id) WHERE r.memory_id = %s FOR SHARE OF s",
        (memory_id,))
    return await cur.fetchone()


async def set_record(conn: Conn, record_id: uuid.UUID, *, kind: str | None,
                     structured: Any, cognition: Any) -> None:
    """A record's side columns after an update or a delete (a tombstone clears both)."""
    await conn.execute(
        "UPDATE memory_records SET kind = %s, structured = %s, cognition = %s"
        " WHERE memory_id = %s", (kind, _json(structured), _json(cognition), record_id))


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


async def take_receipt(conn: Conn, row: Row) -> None:
    """Insert a receipt, the first statement of its write's transaction. A key another
    request took first raises ConflictError ``receipt_key_taken`` (the transaction rolls
    back; one still in flight is waited for first, within lock_timeout)."""
    try:
        await conn.execute(
            "INSERT INTO memory_receipts (receipt_id, space_id, principal, op,"
            " idempotency_key, request_sha256, status) VALUES (%(receipt_id)s, %(space_id)s,"
            " %(principal)s, %(op)s, %(idempotency_key)s, %(request_sha256)s, %(status)s)",
            row)
    except pg.UniqueViolation as exc:
        raise ConflictError("another request with this idempotency key completed first",
                            code=RECEIPT_TAKEN) from exc


async def settle_receipt(conn: Conn, receipt_id: uuid.UUID, *, status: str,
                         refs: Sequence[str], revision: int | None) -> Row:
    """A receipt's outcome, in the transaction that took it."""
    cur = await conn.execute(
        "UPDATE memory_receipts SET status = %s, refs = %s, revision = %s,"
        " completed_at = CASE WHEN %s = 'pending' THEN NULL ELSE clock_timestamp() END"
        " WHERE receipt_id = %s RETURNING *",
        (status, list(refs), revision, status, receipt_id))
    row = await cur.fetchone()
    assert row is not None
    return row


async def records_among(conn: Conn, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of the memories ``ids`` are records of a space."""
    cur = await conn.execute("SELECT memory_id FROM memory_records WHERE memory_id = ANY(%s)",
                             (list(ids),))
    return {row["memory_id"] for row in await cur.fetchall()}


async def keyed_receipt(conn: Conn, *, space_id: str, principal: str, op: str,
                        key: str) -> Row | None:
    """The receipt of (space, principal, op, key), or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_receipts WHERE space_id = %s AND principal = %s AND op = %s"
        " AND idempotency_key = %s", (space_id, principal, op, key))
    return await cur.fetchone()


async def receipt(conn: Conn, space_id: str, receipt_id: uuid.UUID) -> Row | None:
    """One receipt of a space, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_receipts WHERE space_id = %s AND receipt_id = %s",
        (space_id, receipt_id))
    return await cur.fetchone()


async def records_by_id(conn: Conn, space_id: str, ids: Sequence[uuid.UUID]) -> list[Row]:
    """The records of a space among ``ids``, in the order of ``ids``."""
    cur = await conn.execute(
        f"SELECT {SEALED_RECORD} FROM memory_records r JOIN memories m ON m.id = r.memory_id"
        " WHERE r.space_id = %s AND r.memory_id = ANY(%s)", (space_id, list(ids)))
    found = {row["memory_id"]: opened(conn, row) for row in await cur.fetchall()}
    return [row for i in ids if (row := found.get(i)) is not None]
