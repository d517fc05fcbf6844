"""Agent signatures of memory writes (table ``memory_signatures``, migration 0006).

Called by the service layer: :func:`insert` inside a store's or update's transaction,
:func:`for_revision` by ``GET /v1/memories/{id}/verify``. Rows are never changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from attested_cortex.store.database import Conn


@dataclass(frozen=True, slots=True)
class MemorySignature:
    """The signature an agent sent for one revision of a memory."""

    memory_id: uuid.UUID
    revision: int
    signature: bytes
    key_fingerprint: str
    signed_by: str
    signed_at: datetime
    attest_level: str


async def insert(conn: Conn, sig: MemorySignature) -> None:
    """Record the signature of a revision just written in this transaction."""
    await conn.execute(
        "INSERT INTO memory_signatures (memory_id, revision, signature, key_fingerprint, "
        "signed_by, signed_at, attest_level) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (sig.memory_id, sig.revision, sig.signature, sig.key_fingerprint, sig.signed_by,
         sig.signed_at, sig.attest_level),
    )


async def of_revisions(conn: Conn, memories: Sequence[tuple[uuid.UUID, int]]
                       ) -> dict[uuid.UUID, bytes]:
    """The signature of each (memory, revision) whose write was signed, in one query."""
    if not memories:
        return {}
    cur = await conn.execute(
        "SELECT s.memory_id, s.signature FROM memory_signatures s "
        "JOIN unnest(%s::uuid[], %s::int[]) AS w(id, revision) "
        "ON s.memory_id = w.id AND s.revision = w.revision",
        ([m for m, _ in memories], [r for _, r in memories]))
    return {row["memory_id"]: bytes(row["signature"]) for row in await cur.fetchall()}


async def for_revision(conn: Conn, memory_id: uuid.UUID, revision: int) -> MemorySignature | None:
    """The signature of ``revision`` of a memory, if its write was signed."""
    cur = await conn.execute(
        "SELECT memory_id, revision, signature, key_fingerprint, signed_by, signed_at, "
        "attest_level FROM memory_signatures WHERE memory_id = %s AND revision = %s",
        (memory_id, revision),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return MemorySignature(**{**row, "signature": bytes(row["signature"])})
