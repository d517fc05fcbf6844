"""Idempotency keys of writes: taken in the write's transaction, answered after it (ADR 0030).

Called by :mod:`attested_cortex.service.settling` (:func:`take`, the first statement of a
keyed write's transaction) and :mod:`attested_cortex.service.idempotency` (:func:`find`,
:func:`answer`). A key belongs to one agent; its row holds the digest of the request that
took it, the id of the object that request wrote, and the answer once it was given.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import errors as pg
from psycopg.types.json import Jsonb

from attested_cortex.errors import ConflictError
from attested_cortex.store.database import Conn


@dataclass(frozen=True)
class Claim:
    """What a keyed write takes: its agent's key, its request's digest, the id it writes."""

    agent_id: str
    key: str
    request_sha256: bytes
    resource_id: uuid.UUID


@dataclass(frozen=True)
class Kept:
    """A key's row: the request that took it, what it wrote and (once given) the answer."""

    request_sha256: bytes
    resource_id: uuid.UUID
    status: int | None
    answer: dict[str, Any] | None


#: The code of a key taken by a request of the same agent still in flight (or just committed).
IN_USE = "idempotency_key_in_use"


async def take(conn: Conn, claim: Claim) -> None:
    """Take ``claim.key`` for ``claim.agent_id`` in the caller's transaction. A key taken by a
    committed request raises ConflictError ``idempotency_key_in_use`` (and the transaction
    rolls back); one held by a request still in flight is waited for first (lock_timeout)."""
    try:
        await conn.execute(
            "INSERT INTO idempotency_keys (agent_id, key, request_sha256, resource_id)"
            " VALUES (%s, %s, %s, %s)",
            (claim.agent_id, claim.key, claim.request_sha256, claim.resource_id))
    except pg.UniqueViolation as exc:
        raise ConflictError("another request with this Idempotency-Key completed first; "
                            "retry to get its answer", code=IN_USE) from exc


async def find(conn: Conn, agent_id: str, key: str) -> Kept | None:
    """The row of ``agent_id``'s ``key``, or None when no committed write took it."""
    cur = await conn.execute(
        "SELECT request_sha256, resource_id, status, answer FROM idempotency_keys"
        " WHERE agent_id = %s AND key = %s", (agent_id, key))
    row = await cur.fetchone()
    if row is None:
        return None
    return Kept(bytes(row["request_sha256"]), row["resource_id"], row["status"], row["answer"])


async def answer(conn: Conn, agent_id: str, key: str, *, status: int,
                 body: dict[str, Any]) -> None:
    """Keep the answer of the write that took ``key`` (the first answer given stays)."""
    await conn.execute(
        "UPDATE idempotency_keys SET status = %s, answer = %s"
        " WHERE agent_id = %s AND key = %s AND answer IS NULL",
        (status, Jsonb(body), agent_id, key))
