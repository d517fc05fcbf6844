"""The federation tables (migration 0039): per-peer high-water marks, the federated objects
and the quarantine. Called by :mod:`attested_cortex.service.resources.federation` only.

The high-water mark only moves forward (one conditional statement), so two servers of one
cortex receiving from the same peer cannot move it back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from attested_cortex.store.database import Conn


@dataclass(frozen=True)
class FederatedObject:
    """Where a federated object lives here and the change applied to it last."""

    home: str
    object_id: uuid.UUID
    local_id: uuid.UUID
    applied_revision: int
    applied_origin: str
    deleted: bool
    peer: str
    signed_by: str
    key_fingerprint: str


@dataclass(frozen=True)
class Quarantined:
    """One change held apart."""

    id: int
    peer: str
    correlation_id: uuid.UUID
    origin: str
    kind: str
    object_id: uuid.UUID
    revision: int
    reason: str
    change: dict[str, Any]
    received_at: datetime


async def high_water(conn: Conn, peer: str) -> int:
    """The highest sequence number handled from ``peer`` (0: none yet)."""
    cur = await conn.execute("SELECT high_water FROM federation_peers WHERE peer = %s", (peer,))
    row = await cur.fetchone()
    return int(row["high_water"]) if row is not None else 0


async def advance(conn: Conn, peer: str, seq: int) -> None:
    """Move ``peer``'s mark to ``seq`` unless it is already there or beyond."""
    await conn.execute(
        "INSERT INTO federation_peers (peer, high_water) VALUES (%s, %s) "
        "ON CONFLICT (peer) DO UPDATE SET high_water = excluded.high_water, "
        "updated_at = clock_timestamp() "
        "WHERE federation_peers.high_water < excluded.high_water", (peer, seq))


_OBJECT = ("home, object_id, local_id, applied_revision, applied_origin, deleted, peer, "
           "signed_by, key_fingerprint")


async def find(conn: Conn, home: str, object_id: uuid.UUID) -> FederatedObject | None:
    """The federated object, locked for the change being applied (None: not here yet)."""
    cur = await conn.execute(
        f"SELECT {_OBJECT} FROM federation_objects WHERE home = %s AND object_id = %s "
        "FOR UPDATE", (home, object_id))
    row = await cur.fetchone()
    return FederatedObject(**row) if row is not None else None


async def applied(conn: Conn, obj: FederatedObject, *, signature: str,
                  correlation_id: uuid.UUID) -> None:
    """Record the change applied to ``obj`` (insert or replace)."""
    await conn.execute(
        "INSERT INTO federation_objects (home, object_id, local_id, applied_revision, "
        "applied_origin, deleted, peer, signed_by, key_fingerprint, signature, correlation_id) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (home, object_id) DO UPDATE SET local_id = excluded.local_id, "
        "applied_revision = excluded.applied_revision, applied_origin = excluded.applied_origin, "
        "deleted = excluded.deleted, peer = excluded.peer, signed_by = excluded.signed_by, "
        "key_fingerprint = excluded.key_fingerprint, signature = excluded.signature, "
        "correlation_id = excluded.correlation_id, updated_at = clock_timestamp()",
        (obj.home, obj.object_id, obj.local_id, obj.applied_revision, obj.applied_origin,
         obj.deleted, obj.peer, obj.signed_by, obj.key_fingerprint, signature, correlation_id))


async def provenance(conn: Conn, local_id: uuid.UUID) -> FederatedObject | None:
    """The federated object a local memory holds (None: a local memory)."""
    cur = await conn.execute(
        f"SELECT {_OBJECT} FROM federation_objects WHERE local_id = %s", (local_id,))
    row = await cur.fetchone()
    return FederatedObject(**row) if row is not None else None


async def quarantine(conn: Conn, *, peer: str, correlation_id: uuid.UUID, origin: str,
                     kind: str, object_id: uuid.UUID, revision: int, reason: str,
                     change: dict[str, Any]) -> int:
    """Hold a change apart; its id."""
    cur = await conn.execute(
        "INSERT INTO federation_quarantine (peer, correlation_id, origin, kind, object_id, "
        "revision, reason, change) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (peer, correlation_id, origin, kind, object_id, revision, reason, Jsonb(change)))
    row = await cur.fetchone()
    assert row is not None
    return int(row["id"])


async def quarantined(conn: Conn, *, after: int, limit: int) -> list[Quarantined]:
    """Held changes with ids above ``after``, oldest first."""
    cur = await conn.execute(
        "SELECT id, peer, correlation_id, origin, kind, object_id, revision, reason, change, "
        "received_at FROM federation_quarantine WHERE id > %s ORDER BY id LIMIT %s",
        (after, limit))
    return [Quarantined(**row) for row in await cur.fetchall()]


@dataclass(frozen=True)
class Standing:
    """A local memory's state as the conflict rule sees it (ADR 0141): its local revision,
    whether it is deleted, and whether that revision is an edit an agent of this cortex
    signed (a change applied from a peer never has a signature row)."""

    revision: int
    deleted: bool
    edited: bool


async def standing(conn: Conn, local_id: uuid.UUID) -> Standing | None:
    """``local_id``'s :class:`Standing` (None: no such memory here)."""
    cur = await conn.execute(
        "SELECT m.revision, m.deleted_at IS NOT NULL AS deleted, EXISTS (SELECT 1 FROM "
        "memory_signatures s WHERE s.memory_id = m.id AND s.revision = m.revision) AS edited "
        "FROM memories m WHERE m.id = %s", (local_id,))
    row = await cur.fetchone()
    return Standing(int(row["revision"]), bool(row["deleted"]), bool(row["edited"])) \
        if row is not None else None
