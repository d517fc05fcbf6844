"""The outbound federation tables and reads (migration 0042, docs/adr/0132): each peer's
cursor over the outbox, and what a change needs beside its outbox event (the agent's
signature of the revision, whether the object came from a peer, a link's signed fields).
Called by :mod:`attested_cortex.service.workers.federation_sending` and
:mod:`attested_cortex.service.resources.federation_outbound` only.

The cursor only moves forward (``greatest``), so two servers of one cortex sending to the
same peer never move it back; the receiver's high-water mark answers their overlap
``duplicate``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from attested_cortex.store.database import Conn
from attested_cortex.store.errors import translating
from attested_cortex.store.signatures import MemorySignature


async def present(conn: Conn) -> bool:
    """Whether the schema has the cursors (migration 0042): older ones send nothing."""
    cur = await conn.execute("SELECT to_regclass('federation_cursors') IS NOT NULL AS ok")
    row = await cur.fetchone()
    return bool(row is not None and row["ok"])


async def cursor(conn: Conn, peer: str) -> int:
    """The peer's cursor; a new peer starts at 0 (it is sent what the outbox holds)."""
    with translating():
        await conn.execute("INSERT INTO federation_cursors (peer, cursor) VALUES (%s, 0) "
                           "ON CONFLICT (peer) DO NOTHING", (peer,))
        cur = await conn.execute("SELECT cursor FROM federation_cursors WHERE peer = %s",
                                 (peer,))
        row = await cur.fetchone()
    assert row is not None
    return int(row["cursor"])


async def advance(conn: Conn, peer: str, to: int, sent: int) -> None:
    """Move the cursor forward to ``to`` after ``sent`` changes were acknowledged."""
    with translating():
        await conn.execute(
            "UPDATE federation_cursors SET cursor = greatest(cursor, %s), sent = sent + %s, "
            "failed_attempts = 0, last_success_at = CASE WHEN %s > 0 THEN clock_timestamp() "
            "ELSE last_success_at END, updated_at = clock_timestamp() WHERE peer = %s",
            (to, sent, sent, peer))


async def failed(conn: Conn, peer: str, error: str) -> None:
    """Count a failed attempt (the cursor stays: the backlog waits for the peer)."""
    with translating():
        await conn.execute(
            "UPDATE federation_cursors SET failed_attempts = failed_attempts + 1, "
            "last_failure_at = clock_timestamp(), last_error = %s, "
            "updated_at = clock_timestamp() WHERE peer = %s", (error[:500], peer))


@dataclass(frozen=True, slots=True)
class CursorState:
    """One peer's progress (status and tests)."""

    peer: str
    cursor: int
    sent: int
    failed_attempts: int
    last_error: str | None
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None


async def states(conn: Conn) -> list[CursorState]:
    """Every peer's progress, by name."""
    with translating():
        cur = await conn.execute("SELECT peer, cursor, sent, failed_attempts, last_error, "
                                 "last_success_at, last_failure_at "
                                 "FROM federation_cursors ORDER BY peer")
        return [CursorState(**row) for row in await cur.fetchall()]


async def signatures(conn: Conn, revisions: Sequence[tuple[uuid.UUID, int]],
                     ) -> dict[tuple[uuid.UUID, int], MemorySignature]:
    """The agent signature of each (memory, revision) whose write was signed."""
    if not revisions:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT s.memory_id, s.revision, s.signature, s.key_fingerprint, s.signed_by, "
            "s.signed_at, s.attest_level FROM memory_signatures s "
            "JOIN unnest(%s::uuid[], %s::int[]) AS w(id, revision) "
            "ON s.memory_id = w.id AND s.revision = w.revision",
            ([m for m, _ in revisions], [r for _, r in revisions]))
        rows = await cur.fetchall()
    return {(r["memory_id"], r["revision"]): MemorySignature(
        **{**r, "signature": bytes(r["signature"])}) for r in rows}


@dataclass(frozen=True, slots=True)
class Held:
    """A local memory or link that stands for a federated object (``federation_objects``):
    the object's home and id there, and the last (revision, origin) applied to it."""

    home: str
    object_id: uuid.UUID
    applied_revision: int


async def imported(conn: Conn, local_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Held]:
    """Which of ``local_ids`` stand for federated objects (received from a peer, or homed
    here and edited by one), and where each is homed (ADR 0132, ADR 0141)."""
    if not local_ids:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT local_id, home, object_id, applied_revision FROM federation_objects "
            "WHERE local_id = ANY(%s::uuid[])", (list(local_ids),))
        return {r["local_id"]: Held(r["home"], r["object_id"], int(r["applied_revision"]))
                for r in await cur.fetchall()}


async def current(conn: Conn, local_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """The revision each live memory of ``local_ids`` is at now (deleted ones left out): a
    local edit of an imported memory is sent only while it is the memory's state (ADR 0141)."""
    if not local_ids:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT id, revision FROM memories WHERE id = ANY(%s::uuid[]) "
            "AND deleted_at IS NULL", (list(local_ids),))
        return {r["id"]: int(r["revision"]) for r in await cur.fetchall()}


def edit_revision(local_revision: int, held: Held) -> int:
    """The revision a local edit of a federated memory carries on the wire: its local
    revision, raised above the one applied last when the local counter lags (this cortex
    lost a race, so it applied one change fewer than its peers): an edit always outranks
    the state it replaced (ADR 0141). The receiver computes the same for its own edit."""
    return max(local_revision, held.applied_revision + 1)


@dataclass(frozen=True, slots=True)
class LinkRow:
    """A link's signed fields and its ends' namespaces."""

    id: uuid.UUID
    src_id: uuid.UUID
    dst_id: uuid.UUID
    relation: str
    valid_from: datetime
    asserted_until: datetime | None
    valid_until: datetime | None
    observed_by: str
    signature: bytes | None
    signed_at: datetime | None
    src_namespace: str
    dst_namespace: str


async def links(conn: Conn, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, LinkRow]:
    """The links named, with their ends' namespaces."""
    if not ids:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT l.id, l.src_id, l.dst_id, l.relation, l.valid_from, l.asserted_until, "
            "l.valid_until, l.observed_by, l.signature, l.signed_at, "
            "s.namespace AS src_namespace, d.namespace AS dst_namespace FROM links l "
            "JOIN memories s ON s.id = l.src_id JOIN memories d ON d.id = l.dst_id "
            "WHERE l.id = ANY(%s::uuid[])", (list(ids),))
        rows: list[dict[str, Any]] = await cur.fetchall()
    return {r["id"]: LinkRow(**{**r, "signature": None if r["signature"] is None
                                else bytes(r["signature"])}) for r in rows}
