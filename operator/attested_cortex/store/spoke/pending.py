"""Pending work of the spoke-memory family (migration 0024, ADR 0069): the rows an op that
answered ``pending`` leaves for the background worker, and the receipt's final outcome.
Called by the service's ``spoke.reflections`` (enqueue) and ``workers.pending_receipts``
(claim, finish) only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from attested_cortex.store.database import Conn

Row = dict[str, Any]


async def enqueue(conn: Conn, *, receipt_id: uuid.UUID, kind: str, space_id: str,
                  principal: str, payload: dict[str, Any]) -> None:
    """Leave the work of a pending receipt, in the transaction that took the receipt."""
    await conn.execute(
        "INSERT INTO memory_pending_work (receipt_id, kind, space_id, principal, payload)"
        " VALUES (%s, %s, %s, %s, %s)",
        (receipt_id, kind, space_id, principal, Jsonb(payload)))


async def claim(conn: Conn, kinds: Sequence[str]) -> Row | None:
    """The oldest work of ``kinds`` no other transaction holds, locked until this one ends
    (a server killed mid-job rolls back, and the row is claimed again)."""
    cur = await conn.execute(
        "SELECT * FROM memory_pending_work WHERE kind = ANY(%s) ORDER BY created_at, receipt_id"
        " LIMIT 1 FOR UPDATE SKIP LOCKED", (list(kinds),))
    return await cur.fetchone()


async def finish(conn: Conn, receipt_id: uuid.UUID, *, status: str, refs: Sequence[str],
                 revision: int | None, error_code: str | None,
                 extensions: dict[str, Any]) -> Row:
    """Settle a pending receipt (``committed`` or ``failed``) and drop its work."""
    await conn.execute("DELETE FROM memory_pending_work WHERE receipt_id = %s", (receipt_id,))
    cur = await conn.execute(
        "UPDATE memory_receipts SET status = %s, refs = %s, revision = %s, error_code = %s,"
        " extensions = extensions || %s, completed_at = clock_timestamp()"
        " WHERE receipt_id = %s AND status = 'pending' RETURNING *",
        (status, list(refs), revision, error_code, Jsonb(extensions), receipt_id))
    row = await cur.fetchone()
    assert row is not None, "pending work of a receipt that is not pending"
    return row


async def any_waiting(conn: Conn, kinds: Sequence[str]) -> bool:
    """Whether work of ``kinds`` waits: one plain read, outside any transaction (an idle
    worker's poll opens none)."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM memory_pending_work WHERE kind = ANY(%s)) AS found",
        (list(kinds),))
    row = await cur.fetchone()
    return bool(row and row["found"])
