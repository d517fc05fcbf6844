"""Idempotency keys of writes: taken in the write's transaction, answered after it (ADR 0030).

Called by :mod:`attested_cortex.service.pipeline.settling` (:func:`take`, the first statement of a
keyed write's transaction) and :mod:`attested_cortex.service.resources.idempotency` (:func:`find`,
:func:`answer`). A key belongs to one agent; its row holds the digest of the request that
took it, the id of the object that request wrote, and the answer once it was given.

With memories sealed at rest (a sealing cipher on the connection, ADR 0065) the answer, which
holds the memory's text, is kept sealed (``sealed``, ``key_version``; migration 0025) under an
id derived from the agent and the key, so it opens for that key's row only. An answer that
does not open (its key version gone from the ring) reads as never kept: the caller rebuilds
it from the object written and keeps it again (``replace``), sealed under the current version.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import errors as pg
from psycopg.types.json import Jsonb

from attested_cortex.errors import ConflictError
from attested_cortex.store.database import Conn
from attested_cortex.store.memory_ciphers import open_value, seal_value, sealing

#: Namespace of the ids sealed answers are bound to (never a memory's id: those are random,
#: or derived from a batch's first id).
_ANSWERS = uuid.UUID("6f1c2b1e-27a0-5e1d-9c1a-1d3a0a5e2702")


def answer_id(agent_id: str, key: str) -> uuid.UUID:
    """The id a key's sealed answer is bound to (its associated data)."""
    return uuid.uuid5(_ANSWERS, f"idempotency-answer\0{agent_id}\0{key}")


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
    #: A sealed answer that does not open (its key version left the ring): rebuild it.
    unreadable: bool = False


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
        "SELECT request_sha256, resource_id, status, answer, key_version, sealed"
        " FROM idempotency_keys WHERE agent_id = %s AND key = %s", (agent_id, key))
    row = await cur.fetchone()
    if row is None:
        return None
    answer, unreadable = row["answer"], False
    if row["sealed"] is not None:
        plain = open_value(conn, answer_id(agent_id, key), row["key_version"],
                           bytes(row["sealed"]))
        answer, unreadable = (None, True) if plain is None else (json.loads(plain), False)
    return Kept(bytes(row["request_sha256"]), row["resource_id"], row["status"], answer,
                unreadable)


async def answer(conn: Conn, agent_id: str, key: str, *, status: int,
                 body: dict[str, Any], replace: bool = False) -> None:
    """Keep the answer of the write that took ``key`` (the first answer given stays, unless
    ``replace``: a sealed one that no longer opens), sealed when the connection seals."""
    kept = None if sealing(conn) is None else seal_value(  # encode only what is sealed
        conn, answer_id(agent_id, key),
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    sealed, version = kept if kept is not None else (None, None)
    value = Jsonb(body) if kept is None else None
    await conn.execute(
        "UPDATE idempotency_keys SET status = %s, answer = %s, key_version = %s, sealed = %s"
        " WHERE agent_id = %s AND key = %s AND answer IS NULL"
        " AND (sealed IS NULL OR %s)",
        (status, value, version, sealed, agent_id, key, replace))
