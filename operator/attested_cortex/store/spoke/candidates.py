"""Spoke-memory candidates and profile documents (migration 0017), reflections (0018) and
the light listing rows of a space's records. Called by the service's ``spoke_*`` modules
only; dict rows.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from attested_cortex.store.database import Conn
from attested_cortex.store.memory_ciphers import cipher_of, keyed_query

Row = dict[str, Any]


async def insert_candidate(conn: Conn, row: Row) -> None:
    """A new pending candidate (``row``: its columns; ``proposed``: the wire content)."""
    await conn.execute(
        "INSERT INTO memory_candidates (candidate_id, space_id, subject_id, context_id,"
        " proposed, classification, captured_by) VALUES (%(candidate_id)s, %(space_id)s,"
        " %(subject_id)s, %(context_id)s, %(proposed)s, %(classification)s,"
        " %(captured_by)s)", {**row, "proposed": Jsonb(row["proposed"])})


async def candidate(conn: Conn, space_id: str, candidate_id: uuid.UUID, *,
                    lock: bool = False) -> Row | None:
    """One candidate of a space, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_candidates WHERE space_id = %s AND candidate_id = %s"
        + (" FOR UPDATE" if lock else ""), (space_id, candidate_id))
    return await cur.fetchone()


async def candidates(conn: Conn, space_id: str, *, pending: bool | None) -> list[Row]:
    """A space's candidates in capture order (only pending / only consumed / all)."""
    cur = await conn.execute(
        "SELECT * FROM memory_candidates WHERE space_id = %s AND (%s::boolean IS NULL OR"
        " (state = 'pending') = %s) ORDER BY created_at, candidate_id",
        (space_id, pending, pending))
    return list(await cur.fetchall())


async def consume(conn: Conn, candidate_id: uuid.UUID, *, state: str,
                  receipt_id: uuid.UUID) -> None:
    """Consume a pending candidate: its new state, the receipt, and no content kept."""
    await conn.execute(
        "UPDATE memory_candidates SET state = %s, consumed_by = %s, proposed = NULL"
        " WHERE candidate_id = %s", (state, receipt_id, candidate_id))


async def profiles(conn: Conn, space_id: str, subject_id: str) -> list[Row]:
    """A subject's profile documents, by kind."""
    cur = await conn.execute(
        "SELECT * FROM memory_profiles WHERE space_id = %s AND subject_id = %s ORDER BY kind",
        (space_id, subject_id))
    return list(await cur.fetchall())


async def profile(conn: Conn, space_id: str, subject_id: str, kind: str) -> Row | None:
    """One profile document, locked for its update, or None."""
    cur = await conn.execute(
        "SELECT * FROM memory_profiles WHERE space_id = %s AND subject_id = %s AND kind = %s"
        " FOR UPDATE", (space_id, subject_id, kind))
    return await cur.fetchone()


async def put_profile(conn: Conn, *, space_id: str, subject_id: str, kind: str, text: str,
                      by: str) -> Row:
    """Create a profile document at revision 1 or revise it."""
    cur = await conn.execute(
        "INSERT INTO memory_profiles (space_id, subject_id, kind, text, updated_by)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (space_id, subject_id, kind) DO UPDATE"
        " SET text = EXCLUDED.text, updated_by = EXCLUDED.updated_by,"
        " revision = memory_profiles.revision + 1, updated_at = clock_timestamp()"
        " RETURNING *", (space_id, subject_id, kind, text, by))
    row = await cur.fetchone()
    assert row is not None
    return row


async def record_keys(conn: Conn, space_id: str, subject_id: str | None) -> list[Row]:
    """The live records of a space (of one subject): id, subject, placement, provenance,
    revision and creation, in (created_at, id) order: what listing authorizes and pages."""
    cur = await conn.execute(
        "SELECT r.memory_id, r.subject_id, r.context_id, r.source_context_id, m.revision,"
        " m.created_at FROM memory_records r JOIN memories m ON m.id = r.memory_id"
        " WHERE r.space_id = %s AND m.deleted_at IS NULL"
        " AND (%s::text IS NULL OR r.subject_id = %s) ORDER BY m.created_at, r.memory_id",
        (space_id, subject_id, subject_id))
    return list(await cur.fetchall())


async def placements(conn: Conn, space_id: str,
                     ids: list[uuid.UUID]) -> dict[uuid.UUID, Row]:
    """The subject and placement of each record of ``ids`` (tombstones too) by id: what a
    row derived from records (a reflection) is authorized by."""
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT memory_id, subject_id, context_id FROM memory_records"
        " WHERE space_id = %s AND memory_id = ANY(%s)", (space_id, list(set(ids))))
    return {row["memory_id"]: row for row in await cur.fetchall()}


async def set_placement(conn: Conn, record_id: uuid.UUID, context_id: str | None) -> None:
    """A record's new placement (promote)."""
    await conn.execute("UPDATE memory_records SET context_id = %s WHERE memory_id = %s",
                       (context_id, record_id))


async def ranked(conn: Conn, ids: list[uuid.UUID], query: str, limit: int) -> list[Row]:
    """Full-text rank of the records among ``ids`` matching ``query`` (best first); keyed
    like recall's wherever a key ring is bound (ADR 0065): sealed rows stay keyed after
    ``encryption.at_rest`` is turned off."""
    cipher = cipher_of(conn)
    form = ("websearch_to_tsquery('english'::regconfig, %s)" if cipher is None
            else "%s::tsquery")
    if cipher is not None:
        query = await keyed_query(conn, cipher, query)
    cur = await conn.execute(
        f"SELECT id, ts_rank_cd(search, q) AS score FROM memories, {form} q"
        " WHERE id = ANY(%s) AND search @@ q ORDER BY score DESC, id LIMIT %s",
        (query, ids, limit))
    return list(await cur.fetchall())


async def insert_reflection(conn: Conn, row: Row) -> None:
    """A generated reflection (``basis``: its pinned basis as JSON)."""
    await conn.execute(
        "INSERT INTO memory_reflections (reflection_id, space_id, subject_id, text, basis,"
        " state_digest, created_by) VALUES (%(reflection_id)s, %(space_id)s, %(subject_id)s,"
        " %(text)s, %(basis)s, %(state_digest)s, %(created_by)s)",
        {**row, "basis": Jsonb(row["basis"])})


async def reflections(conn: Conn, space_id: str, subject_id: str) -> list[Row]:
    """A subject's reflections, newest first."""
    cur = await conn.execute(
        "SELECT * FROM memory_reflections WHERE space_id = %s AND subject_id = %s"
        " ORDER BY created_at DESC, reflection_id", (space_id, subject_id))
    return list(await cur.fetchall())
