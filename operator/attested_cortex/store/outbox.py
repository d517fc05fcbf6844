"""SQL for the event outbox (migration 0038, ADR 0106): append in the write's transaction,
read past a consumer's cursor, drop by retention. No delivery logic here.

Written by :mod:`attested_cortex.service.pipeline.write_records` (the record step every
memory, link and transcript write already runs as its last statement before COMMIT) and by
the store's one-statement memory insert; read by the delivery worker
(:mod:`attested_cortex.service.workers.delivering`). An append comes after the write's record,
under the audit chain's lock (held until COMMIT), so sequence order is commit order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson
import psycopg

from attested_cortex.store.errors import translating
from attested_cortex.store.events import CHAIN_LOCK_KEY

#: The columns of an event as every read returns them.
_COLUMNS: Final = "seq, event, key, namespace, payload, created_at"
#: The insert of one event, fed by a one-statement write (``FROM e``: after its record).
INSERT_SQL: Final = "INSERT INTO outbox_events (event, key, namespace, payload) "


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """An event to append: its ``post_*`` name, its ordering key, its namespace, its payload
    (the ``post_*`` hook payload)."""

    event: str
    key: str
    namespace: str | None
    payload: dict[str, Any]

    def params(self) -> tuple[str, str, str | None, str]:
        return self.event, self.key, self.namespace, json_text(self.payload)


def json_text(value: object) -> str:
    """Compact JSON: orjson's, or the standard library's for what orjson refuses (an
    integer past 64 bits in a memory's metadata, which the API stores and answers)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Stored:
    """An appended event."""

    seq: int
    event: str
    key: str
    namespace: str | None
    payload: dict[str, Any]
    created_at: datetime


def _stored(row: Sequence[Any]) -> Stored:
    return Stored(int(row[0]), row[1], row[2], row[3], row[4], row[5])


async def append(conn: psycopg.AsyncConnection[Any], events: Sequence[OutboxEvent]) -> None:
    """Append ``events`` in order inside the caller's transaction, which must hold the chain
    lock (:data:`.events.CHAIN_LOCK_KEY`: its write record was appended first, as every caller's
    is): that is what makes sequence order commit order."""
    if not events:
        return
    columns = [list(c) for c in zip(*(e.params() for e in events), strict=True)]
    with translating():
        await conn.execute(
            INSERT_SQL + "SELECT e, k, n, p::jsonb FROM unnest(%s::text[], %s::text[], "
            "%s::text[], %s::text[]) WITH ORDINALITY AS x(e, k, n, p, o) ORDER BY o", columns)


async def lock(conn: psycopg.AsyncConnection[Any]) -> None:
    """Take the chain lock until the caller's transaction ends: for an append in a
    transaction that appends no audit record first (an approval's)."""
    with translating():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHAIN_LOCK_KEY,))


async def after(conn: psycopg.AsyncConnection[Any], cursor: int, limit: int) -> list[Stored]:
    """Up to ``limit`` events past ``cursor``, in order."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_COLUMNS} FROM outbox_events WHERE seq > %s ORDER BY seq LIMIT %s",
            (cursor, limit))
        return [_stored(r) for r in await cur.fetchall()]


async def one(conn: psycopg.AsyncConnection[Any], seq: int) -> Stored | None:
    """The event numbered ``seq`` if the outbox still holds it."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_COLUMNS} FROM outbox_events WHERE seq = %s", (seq,))
        row = await cur.fetchone()
    return None if row is None else _stored(row)


async def bounds(conn: psycopg.AsyncConnection[Any]) -> tuple[int, int]:
    """The oldest sequence held minus one (what was dropped) and the head (0 when empty)."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT coalesce(min(seq) - 1, (SELECT last_value FROM outbox_events_seq_seq "
            "WHERE is_called), 0), coalesce(max(seq), (SELECT last_value FROM "
            "outbox_events_seq_seq WHERE is_called), 0) FROM outbox_events")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def drop_before(conn: psycopg.AsyncConnection[Any], before: datetime) -> int:
    """Drop events appended before ``before`` (the retention bound); how many."""
    with translating():
        cur = await conn.execute("DELETE FROM outbox_events WHERE created_at < %s", (before,))
        return cur.rowcount


async def present(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the schema has the outbox (migration 0038): older schemas write none."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT to_regclass('outbox_events') IS NOT NULL")
        row = await cur.fetchone()
    return bool(row and row[0])
