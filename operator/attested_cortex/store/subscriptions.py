"""SQL for webhook subscriptions, their delivery state and their dead letters (migration
0038, ADR 0106). Called by the subscription resources (the API, MCP, the operator's sync) and
by the delivery worker; psycopg errors are translated here (a duplicate name is a 409).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import psycopg
from psycopg.types.json import Jsonb

from attested_cortex.errors import ConflictError
from attested_cortex.store.errors import translating

_COLUMNS: Final = ("s.id, s.name, s.url, s.events, s.namespaces, s.secret, s.max_in_flight, "
                   "s.enabled, s.allow_private_targets, s.managed_by, s.created_at, "
                   "s.updated_at, t.cursor, t.delivered, t.failed_attempts, "
                   "t.last_success_at, t.last_failure_at, t.last_error, "
                   "(SELECT count(*) FROM subscription_dead_letters d "
                   "WHERE d.subscription_id = s.id) AS dead_letters")
_FROM: Final = "subscriptions s JOIN subscription_states t ON t.subscription_id = s.id"
#: The fields a create or an update sets.
FIELDS: Final = ("name", "url", "events", "namespaces", "secret", "max_in_flight", "enabled",
                 "allow_private_targets", "managed_by")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription with its consumer state."""

    id: uuid.UUID
    name: str
    url: str
    events: tuple[str, ...]
    namespaces: tuple[str, ...]
    secret: str
    max_in_flight: int
    enabled: bool
    allow_private_targets: bool
    managed_by: str
    created_at: datetime
    updated_at: datetime
    cursor: int
    delivered: int
    failed_attempts: int
    last_success_at: datetime | None
    last_failure_at: datetime | None
    last_error: str | None
    dead_letters: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An event that exhausted its retries for one subscription."""

    subscription_id: uuid.UUID
    seq: int
    event: str
    key: str
    payload: dict[str, Any]
    attempts: int
    last_error: str
    dead_at: datetime


def _sub(row: Sequence[Any]) -> Subscription:
    values = list(row)
    values[3], values[4] = tuple(values[3]), tuple(values[4])
    return Subscription(*values)


async def create(conn: psycopg.AsyncConnection[Any], fields: dict[str, Any]) -> Subscription:
    """Insert a subscription starting at the outbox's head (409 for a taken name)."""
    sub_id = uuid.uuid4()
    try:
        with translating():
            await conn.execute(
                f"INSERT INTO subscriptions (id, {', '.join(FIELDS)}) VALUES "
                f"(%s, {', '.join(['%s'] * len(FIELDS))})",
                (sub_id, *(fields[f] for f in FIELDS)))
            await conn.execute(
                "INSERT INTO subscription_states (subscription_id, cursor) SELECT %s, "
                "coalesce((SELECT max(seq) FROM outbox_events), 0)", (sub_id,))
    except ConflictError as exc:
        raise ConflictError(f"a subscription named {fields['name']!r} exists",
                            code="subscription_exists", name=fields["name"]) from exc
    found = await get(conn, sub_id)
    assert found is not None
    return found


async def update(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID,
                 fields: dict[str, Any]) -> Subscription | None:
    """Set ``fields`` (a subset of :data:`FIELDS`); None when there is no such one."""
    chosen = {k: v for k, v in fields.items() if k in FIELDS}
    if chosen:
        sets = ", ".join(f"{k} = %s" for k in chosen)
        with translating():
            await conn.execute(f"UPDATE subscriptions SET {sets}, updated_at = now() "
                               "WHERE id = %s", (*chosen.values(), sub_id))
    return await get(conn, sub_id)


async def delete(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID) -> bool:
    with translating():
        cur = await conn.execute("DELETE FROM subscriptions WHERE id = %s", (sub_id,))
        return cur.rowcount > 0


async def get(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID) -> Subscription | None:
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE s.id = %s", (sub_id,))
        row = await cur.fetchone()
    return None if row is None else _sub(row)


async def by_name(conn: psycopg.AsyncConnection[Any], name: str) -> Subscription | None:
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE s.name = %s", (name,))
        row = await cur.fetchone()
    return None if row is None else _sub(row)


async def listed(conn: psycopg.AsyncConnection[Any]) -> list[Subscription]:
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_COLUMNS} FROM {_FROM} ORDER BY s.name")
        return [_sub(r) for r in await cur.fetchall()]


async def advance(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID, *, read: int,
                  cursor: int, delivered: int, success_at: datetime | None) -> None:
    """Record a batch's progress: the new cursor when it is still the ``read`` one (a
    replay that moved it meanwhile wins), the count and the latest success."""
    with translating():
        await conn.execute(
            "UPDATE subscription_states SET cursor = CASE WHEN cursor = %s THEN %s "
            "ELSE cursor END, delivered = delivered + %s, "
            "last_success_at = coalesce(%s, last_success_at) WHERE subscription_id = %s",
            (read, cursor, delivered, success_at, sub_id))


async def advance_many(conn: psycopg.AsyncConnection[Any],
                       moves: Sequence[tuple[uuid.UUID, int, int, int, datetime | None]]
                       ) -> set[uuid.UUID]:
    """:func:`advance` for several subscriptions in one statement (``moves``: id, read,
    cursor, delivered, success_at); the ids whose cursor is now the one asked for (the
    others were moved by a replay meanwhile). The caller's transaction may commit without
    waiting for the disk (``synchronous_commit = off``): a cursor lost in a crash only
    re-delivers (at least once), and this runs once per batch per subscription."""
    if not moves:
        return set()
    columns = [list(c) for c in zip(*moves, strict=True)]
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "UPDATE subscription_states s SET cursor = CASE WHEN s.cursor = v.read "
            "THEN v.cursor ELSE s.cursor END, delivered = s.delivered + v.delivered, "
            "last_success_at = coalesce(v.success_at, s.last_success_at) "
            "FROM unnest(%s::uuid[], %s::bigint[], %s::bigint[], %s::bigint[], "
            "%s::timestamptz[]) AS v(id, read, cursor, delivered, success_at) "
            "WHERE s.subscription_id = v.id RETURNING s.subscription_id, s.cursor = v.cursor",
            columns)
        return {row[0] for row in await cur.fetchall() if row[1]}


async def note_failure(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID, *,
                       at: datetime, error: str) -> None:
    """Record a failed attempt as it happens (a batch in retries shows it before it ends)."""
    with translating():
        await conn.execute(
            "UPDATE subscription_states SET failed_attempts = failed_attempts + 1, "
            "last_failure_at = %s, last_error = %s WHERE subscription_id = %s",
            (at, error, sub_id))


async def rewind(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID, cursor: int) -> bool:
    """Set the cursor (replay from ``cursor + 1``)."""
    with translating():
        cur = await conn.execute("UPDATE subscription_states SET cursor = %s "
                                 "WHERE subscription_id = %s", (cursor, sub_id))
        return cur.rowcount > 0


async def bury(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID, *, seq: int, event: str,
               key: str, payload: dict[str, Any], attempts: int, error: str) -> None:
    """Keep a dead letter (a second burial of the same event updates the first)."""
    with translating():
        await conn.execute(
            "INSERT INTO subscription_dead_letters (subscription_id, seq, event, key, payload, "
            "attempts, last_error) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s) "
            "ON CONFLICT (subscription_id, seq) DO UPDATE SET attempts = "
            "subscription_dead_letters.attempts + excluded.attempts, "
            "last_error = excluded.last_error, dead_at = now()",
            (sub_id, seq, event, key, Jsonb(payload), attempts, error))


_DEAD: Final = "subscription_id, seq, event, key, payload, attempts, last_error, dead_at"


async def dead_letters(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID, *,
                       after: int = 0, limit: int = 100) -> list[DeadLetter]:
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_DEAD} FROM subscription_dead_letters WHERE subscription_id = %s "
            "AND seq > %s ORDER BY seq LIMIT %s", (sub_id, after, limit))
        return [DeadLetter(*r) for r in await cur.fetchall()]


async def dead_letter(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID,
                      seq: int) -> DeadLetter | None:
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_DEAD} FROM subscription_dead_letters WHERE subscription_id = %s "
            "AND seq = %s", (sub_id, seq))
        row = await cur.fetchone()
    return None if row is None else DeadLetter(*row)


async def forget_dead(conn: psycopg.AsyncConnection[Any], sub_id: uuid.UUID,
                      seq: int | None = None) -> int:
    """Drop one dead letter (``seq``) or all of them (purge); how many."""
    with translating():
        if seq is None:
            cur = await conn.execute("DELETE FROM subscription_dead_letters "
                                     "WHERE subscription_id = %s", (sub_id,))
        else:
            cur = await conn.execute("DELETE FROM subscription_dead_letters "
                                     "WHERE subscription_id = %s AND seq = %s", (sub_id, seq))
        return cur.rowcount

