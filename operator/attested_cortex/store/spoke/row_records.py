"""The latest op record of each spoke-memory row (migration 0037, ADR 0087 section 9).

Called by :mod:`attested_cortex.service.resources.spoke.audit`: it notes the rows each
op record names in the transaction that appends it, and looks a row's latest record up
before an op re-records the row (one primary-key read instead of a scan of the chain);
and by the read receipts of spoke records (:mod:`.service.resources.receipts`, ADR 0104).
"""

from __future__ import annotations

from collections.abc import Iterable

from attested_cortex.store.database import Conn
from attested_cortex.store.errors import translating

_UPSERT = (
    "INSERT INTO spoke_row_records (kind, key, sequence) SELECT k, r, s "
    "FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS u(k, r, s) "
    "ON CONFLICT (kind, key) DO UPDATE SET sequence = excluded.sequence "
    "WHERE spoke_row_records.sequence < excluded.sequence")


async def note(conn: Conn, noted: Iterable[tuple[str, str, int]]) -> None:
    """Each (kind, key, sequence): the op record at that sequence is the row's latest (an
    older sequence than the one noted changes nothing)."""
    latest: dict[tuple[str, str], int] = {}
    for kind, key, sequence in noted:  # one statement may not upsert a key twice
        latest[kind, key] = max(sequence, latest.get((kind, key), sequence))
    if not latest:
        return
    pairs = sorted(latest)  # sorted: two writers lock keys in one order
    with translating():
        await conn.execute(_UPSERT, ([k for k, _ in pairs], [r for _, r in pairs],
                                     [latest[p] for p in pairs]))


async def latest(conn: Conn, kind: str, key: str) -> int | None:
    """The sequence of the latest op record naming the row, None for a row none names."""
    with translating():
        cur = await conn.execute(
            "SELECT sequence FROM spoke_row_records WHERE kind = %s AND key = %s", (kind, key))
        row = await cur.fetchone()
    return None if row is None else int(row["sequence"])


async def latest_many(conn: Conn, kind: str, keys: Iterable[str]) -> dict[str, int]:
    """:func:`latest` of many rows in one statement (a row none names is left out)."""
    with translating():
        cur = await conn.execute(
            "SELECT key, sequence FROM spoke_row_records WHERE kind = %s AND key = ANY(%s)",
            (kind, sorted(set(keys))))
        return {str(r["key"]): int(r["sequence"]) for r in await cur.fetchall()}


async def present(conn: Conn) -> bool:
    """Whether the table exists (a server may start on a schema before migration 0037)."""
    with translating():
        cur = await conn.execute("SELECT to_regclass('spoke_row_records') IS NOT NULL AS t")
        row = await cur.fetchone()
    return bool(row is not None and row["t"])


async def empty(conn: Conn) -> bool:
    """Whether no row is noted (before the first start after migration 0037, or after a
    bundle import, which does not carry the table)."""
    with translating():
        cur = await conn.execute("SELECT NOT EXISTS (SELECT 1 FROM spoke_row_records) AS e")
        row = await cur.fetchone()
    return bool(row is not None and row["e"])
