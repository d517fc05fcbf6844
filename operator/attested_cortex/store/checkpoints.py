"""SQL for the audit tree's nodes and signed checkpoints (migration 0035). No crypto here
beyond the database's own ``sha256`` for the leaf hashes.

Called only by :mod:`attested_cortex.attest.checkpointing`, which computes the tree and
signs. A checkpoint is cut under a transaction-scoped advisory lock (:data:`LOCK_KEY`), so
two replicas never cut the same size twice; nodes and checkpoints are only ever inserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from attested_cortex.store.errors import translating

#: The checkpointer's advisory key ("atcxckpt"); distinct from the chain lock.
LOCK_KEY = 0x6174_6378_636B_7074
#: ``sha256(0x00 || event hash)``: the RFC 9162 leaf hash, computed where the row is.
_LEAF = "sha256('\\x00'::bytea || hash)"


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One signed checkpoint."""

    size: int
    root: bytes
    origin: str
    note: str
    created_at: datetime


_CHECKPOINT = "tree_size, root_hash, origin, note, created_at"


def _checkpoint(row: Sequence[Any]) -> CheckpointRow:
    return CheckpointRow(int(row[0]), bytes(row[1]), row[2], row[3], row[4])


async def lock(conn: psycopg.AsyncConnection[Any]) -> None:
    """Take the checkpointer's lock until the caller's transaction ends."""
    with translating():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))


async def head_size(conn: psycopg.AsyncConnection[Any]) -> int:
    """The number of events in the chain (its last sequence)."""
    with translating():
        cur = await conn.execute("SELECT coalesce(max(sequence), 0) FROM signed_events")
        row = await cur.fetchone()
    assert row is not None
    return int(_first(row))


async def latest(conn: psycopg.AsyncConnection[Any]) -> CheckpointRow | None:
    """The checkpoint of the largest tree."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_CHECKPOINT} FROM audit_checkpoints ORDER BY tree_size DESC LIMIT 1")
        row = await cur.fetchone()
    return None if row is None else _checkpoint(row)


async def at_size(conn: psycopg.AsyncConnection[Any], size: int) -> CheckpointRow | None:
    """The checkpoint of exactly ``size`` events, if one was cut."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"SELECT {_CHECKPOINT} FROM audit_checkpoints WHERE tree_size = %s", (size,))
        row = await cur.fetchone()
    return None if row is None else _checkpoint(row)


async def roots(conn: psycopg.AsyncConnection[Any]) -> dict[int, bytes]:
    """Every checkpoint's root by size (the audit walk checks each against the events);
    none for a role that may read the chain but not the checkpoints (an auditor's)."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT to_regclass('audit_checkpoints') IS NOT NULL AND "
            "has_table_privilege('audit_checkpoints', 'SELECT')")
        readable = await cur.fetchone()
        if not (readable and readable[0]):
            return {}
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT tree_size, root_hash FROM audit_checkpoints")
        return {int(size): bytes(root) for size, root in await cur.fetchall()}


async def leaves(conn: psycopg.AsyncConnection[Any], first: int, last: int) -> list[bytes]:
    """The leaf hashes of events ``first..last`` (sequences), in order."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row, binary=True).execute(
            f"SELECT {_LEAF} FROM signed_events WHERE sequence BETWEEN %s AND %s "
            "ORDER BY sequence", (first, last))
        return [bytes(row[0]) for row in await cur.fetchall()]


async def nodes(conn: psycopg.AsyncConnection[Any], wanted: Iterable[tuple[int, int]]
                ) -> dict[tuple[int, int], bytes]:
    """The hashes of the perfect subtrees ``wanted`` that exist, by ``(level, index)``:
    level 0 from the events, the others from ``audit_tree_nodes`` (one statement)."""
    wanted = list(wanted)
    if not wanted:
        return {}
    levels = [level for level, _ in wanted]
    indexes = [index for _, index in wanted]
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row, binary=True).execute(
            "SELECT w.level, w.idx, coalesce(n.hash, "
            f"(SELECT {_LEAF} FROM signed_events e WHERE w.level = 0 "
            "AND e.sequence = w.idx + 1)) "
            "FROM unnest(%s::smallint[], %s::bigint[]) AS w(level, idx) "
            "LEFT JOIN audit_tree_nodes n ON n.level = w.level AND n.idx = w.idx",
            (levels, indexes))
        rows = await cur.fetchall()
    return {(int(level), int(index)): bytes(digest) for level, index, digest in rows
            if digest is not None}


async def insert(conn: psycopg.AsyncConnection[Any], made: Sequence[tuple[int, int, bytes]],
                 checkpoint: CheckpointRow) -> None:
    """Keep the perfect nodes ``(level, index, hash)`` of level >= 1 and the checkpoint."""
    kept = [node for node in made if node[0] >= 1]
    with translating():
        if kept:
            await conn.execute(
                "INSERT INTO audit_tree_nodes (level, idx, hash) "
                "SELECT * FROM unnest(%s::smallint[], %s::bigint[], %s::bytea[]) "
                "ON CONFLICT DO NOTHING",
                ([n[0] for n in kept], [n[1] for n in kept], [n[2] for n in kept]))
        await conn.execute(
            "INSERT INTO audit_checkpoints (tree_size, root_hash, origin, note) "
            "VALUES (%s, %s, %s, %s)",
            (checkpoint.size, checkpoint.root, checkpoint.origin, checkpoint.note))


async def cosignatures(conn: psycopg.AsyncConnection[Any], size: int) -> list[str]:
    """The witnesses' cosignature lines of the checkpoint of ``size``, by witness name."""
    with translating():
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "SELECT line FROM audit_cosignatures WHERE tree_size = %s ORDER BY witness",
            (size,))
        return [str(row[0]) for row in await cur.fetchall()]


async def add_cosignature(conn: psycopg.AsyncConnection[Any], *, size: int, witness: str,
                          line: str) -> None:
    """Keep a witness's cosignature line (the first one per witness and size)."""
    with translating():
        await conn.execute(
            "INSERT INTO audit_cosignatures (tree_size, witness, line) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING", (size, witness, line))


def _first(row: Any) -> Any:
    return row[0] if isinstance(row, (tuple, list)) else next(iter(row.values()))
