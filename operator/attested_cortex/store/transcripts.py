"""Transcript rows and the spans memories cite: insert, read, archive, prune, count.

Called by :mod:`attested_cortex.service.resources.transcripts` (store, replay, capabilities, the
sweeper), :mod:`attested_cortex.service.resources.memories` (a store that cites spans),
:mod:`attested_cortex.store.usage` (the storage quota) and
:mod:`attested_cortex.store.scanning` (the deep audit). Every function takes a connection
the caller holds; the sweeper's updates are bounded batches. Writes return each row as the
audit chain records it (:class:`Recorded`: with the SHA-256 of its frame, computed by the
database). Table definitions: ``migrations/0008_transcripts.sql``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from attested_cortex.store import written
from attested_cortex.store.database import Conn
from attested_cortex.store.written import WrittenBy

_COLUMNS = ("id, namespace, owner, metadata, raw_bytes, raw_chars, stored_bytes, created_at, "
            f"archived_at, pruned_at, key_version, {written.COLUMNS}")
#: A row as its write record covers it: the frame's digest (NULL once pruned), not its bytes.
RECORD_COLUMNS = f"{_COLUMNS}, sha256(frame) AS frame_sha256"
#: What one transcript counts against its owner's storage quota: the frame at rest and the
#: metadata, until it is pruned (then nothing: the owner cannot delete one, retention frees it).
#: The SQL function of migration 0009, which the usage triggers also call.
OWNED_BYTES = "coalesce(sum(cortex_transcript_bytes(stored_bytes, metadata, pruned_at)), 0)"


@dataclass(frozen=True)
class Transcript:
    """One transcript row without its frame (``frame`` is read only for replay)."""

    id: uuid.UUID
    namespace: str
    owner: str
    metadata: dict[str, Any]
    raw_bytes: int
    raw_chars: int
    stored_bytes: int
    created_at: datetime
    archived_at: datetime | None
    pruned_at: datetime | None
    #: The master key version ``frame`` is sealed under (migration 0015); None: plain zstd.
    key_version: int | None = None
    #: The tier and effective scopes of the request that stored it (migration 0021; the
    #: sweeper's archive, prune and re-seal keep them).
    written_tier: str | None = None
    written_scopes: tuple[str, ...] | None = None
    #: Its Allow summary (migration 0040, ADR 0124); None: stored before, or not by a request.
    written_allowed: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Citation:
    """One span a memory cites, with the cited transcript's row."""

    ordinal: int
    transcript: Transcript
    start: int
    end: int


@dataclass(frozen=True)
class Recorded:
    """A transcript row and the digest of its frame (None once pruned): what the audit
    chain's record of a transcript write covers."""

    transcript: Transcript
    frame_sha256: bytes | None


def _transcript(row: dict[str, Any]) -> Transcript:
    return Transcript(**{k: row[k] for k in Transcript.__dataclass_fields__
                         if k not in ("written_scopes", "written_allowed")},
                      written_scopes=written.scopes_of(row["written_scopes"]),
                      written_allowed=written.scopes_of(row["written_allowed"]))


def recorded(row: dict[str, Any]) -> Recorded:
    """A row read with :data:`RECORD_COLUMNS`."""
    digest = row["frame_sha256"]
    return Recorded(_transcript(row), None if digest is None else bytes(digest))


async def insert(conn: Conn, *, transcript_id: uuid.UUID, namespace: str, owner: str,
                 metadata: dict[str, Any], frame: bytes, raw_bytes: int,
                 raw_chars: int, key_version: int | None = None,
                 by: WrittenBy | None = None) -> Recorded:
    """Store one transcript (its frame already compressed, and sealed under
    ``key_version`` when one is given)."""
    cur = await conn.execute(
        "INSERT INTO transcripts (id, namespace, owner, metadata, frame, raw_bytes, raw_chars, "
        f"stored_bytes, key_version, {written.COLUMNS}) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING {RECORD_COLUMNS}",
        (transcript_id, namespace, owner, Jsonb(metadata), frame, raw_bytes, raw_chars,
         len(frame), key_version, *written.params(by)))
    row = await cur.fetchone()
    assert row is not None
    return recorded(row)


async def get_many(conn: Conn, ids: Sequence[uuid.UUID], *,
                   for_share: bool = False) -> dict[uuid.UUID, Transcript]:
    """The rows among ``ids`` that exist (``for_share``: locked against the sweeper until the
    caller's transaction ends)."""
    lock = " FOR SHARE" if for_share else ""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM transcripts WHERE id = ANY(%s){lock}",
                             (list(ids),))
    return {row["id"]: _transcript(row) for row in await cur.fetchall()}


async def with_frames(conn: Conn, ids: Sequence[uuid.UUID],
                      ) -> dict[uuid.UUID, tuple[Transcript, bytes | None]]:
    """The rows among ``ids`` and their frames (None once pruned), read in one statement:
    one snapshot, so a row and its frame always agree (a replay that read the row before a
    prune and the frame after took a pruned transcript for an altered one)."""
    cur = await conn.execute(f"SELECT {_COLUMNS}, frame FROM transcripts WHERE id = ANY(%s)",
                             (list(ids),))
    return {row["id"]: (_transcript(row), None if row["frame"] is None else bytes(row["frame"]))
            for row in await cur.fetchall()}


async def cite(conn: Conn, memory_id: uuid.UUID,
               spans: Sequence[tuple[uuid.UUID, int, int]]) -> None:
    """Record a memory's cited spans, in order."""
    if not spans:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO memory_transcript_links (memory_id, ordinal, transcript_id, "
            "span_start, span_end) VALUES (%s, %s, %s, %s, %s)",
            [(memory_id, i, t, start, end) for i, (t, start, end) in enumerate(spans)])


async def citations(conn: Conn, memory_id: uuid.UUID) -> list[Citation]:
    """The spans ``memory_id`` cites, in its order, each with its transcript's row."""
    cols = ", ".join(f"t.{c.strip()}" for c in _COLUMNS.split(","))
    cur = await conn.execute(
        f"SELECT l.ordinal, l.span_start, l.span_end, {cols} FROM memory_transcript_links l "
        "JOIN transcripts t ON t.id = l.transcript_id WHERE l.memory_id = %s "
        "ORDER BY l.ordinal", (memory_id,))
    return [Citation(row["ordinal"], _transcript(row), int(row["span_start"]),
                     int(row["span_end"])) for row in await cur.fetchall()]


async def live_namespaces(conn: Conn) -> list[str]:
    """Namespaces holding transcripts not archived yet (what the sweeper walks)."""
    cur = await conn.execute(
        "SELECT DISTINCT namespace FROM transcripts WHERE archived_at IS NULL")
    return [row["namespace"] for row in await cur.fetchall()]


async def to_archive(conn: Conn, *, namespaces: Sequence[str], created_before: datetime,
                     limit: int, skip: Sequence[uuid.UUID] = ()) -> list[Recorded]:
    """At most ``limit`` transcripts of ``namespaces`` created before the cut-off, oldest
    first, locked until the caller's transaction ends (``skip``: rows the sweeper refused)."""
    cur = await conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM transcripts WHERE archived_at IS NULL "
        "AND namespace = ANY(%s) AND created_at < %s AND id <> ALL(%s) "
        "ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED",
        (list(namespaces), created_before, list(skip), limit))
    return [recorded(row) for row in await cur.fetchall()]


async def archive(conn: Conn, ids: Sequence[uuid.UUID], *, now: datetime) -> list[Recorded]:
    """Archive these transcripts (locked by :func:`to_archive`); the rows, for their write
    records."""
    cur = await conn.execute(
        f"UPDATE transcripts SET archived_at = %s WHERE id = ANY(%s) RETURNING {RECORD_COLUMNS}",
        (now, list(ids)))
    return [recorded(row) for row in await cur.fetchall()]


async def to_prune(conn: Conn, *, archived_before: datetime, limit: int,
                   skip: Sequence[uuid.UUID] = ()) -> list[Recorded]:
    """At most ``limit`` transcripts archived before the cut-off whose frames remain, locked
    until the caller's transaction ends (``skip``: rows the sweeper refused)."""
    cur = await conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM transcripts WHERE pruned_at IS NULL "
        "AND archived_at < %s AND id <> ALL(%s) ORDER BY archived_at LIMIT %s "
        "FOR UPDATE SKIP LOCKED", (archived_before, list(skip), limit))
    return [recorded(row) for row in await cur.fetchall()]


async def prune(conn: Conn, ids: Sequence[uuid.UUID], *, now: datetime) -> list[Recorded]:
    """Drop the frames of these transcripts (locked by :func:`to_prune`); the rows, for
    their write records."""
    cur = await conn.execute(
        "UPDATE transcripts SET frame = NULL, pruned_at = %s WHERE id = ANY(%s) "
        f"RETURNING {RECORD_COLUMNS}", (now, list(ids)))
    return [recorded(row) for row in await cur.fetchall()]


async def counts(conn: Conn) -> dict[str, int]:
    """How many transcripts are stored (live), archived and pruned, and their stored bytes."""
    cur = await conn.execute(
        "SELECT count(*) FILTER (WHERE archived_at IS NULL) AS stored, "
        "count(*) FILTER (WHERE archived_at IS NOT NULL AND pruned_at IS NULL) AS archived, "
        "count(*) FILTER (WHERE pruned_at IS NOT NULL) AS pruned, "
        "coalesce(sum(stored_bytes) FILTER (WHERE pruned_at IS NULL), 0) AS stored_bytes, "
        "coalesce(sum(raw_bytes) FILTER (WHERE pruned_at IS NULL), 0) AS raw_bytes "
        "FROM transcripts")
    row = await cur.fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}



async def sealed_counts(conn: Conn) -> dict[int | None, int]:
    """Frames held, by the master key version they are sealed under (None: plain): what
    rotation must re-seal before a version may go (ADR 0056)."""
    cur = await conn.execute("SELECT key_version, count(*) AS n FROM transcripts "
                             "WHERE frame IS NOT NULL GROUP BY key_version")
    return {row["key_version"]: int(row["n"]) for row in await cur.fetchall()}


async def to_reseal(conn: Conn, *, current: int, plain: bool, limit: int,
                    skip: Sequence[uuid.UUID] = ()) -> list[tuple[Recorded, bytes]]:
    """At most ``limit`` rows whose frame is sealed under a version older than ``current``
    (and, ``plain``, frames not sealed at all), with their frames, locked until the caller's
    transaction ends; never a newer version (a replica not restarted yet with the new ring
    leaves rows the others re-sealed alone)."""
    cur = await conn.execute(
        f"SELECT {RECORD_COLUMNS}, frame FROM transcripts WHERE frame IS NOT NULL "
        "AND (key_version < %s OR (%s AND key_version IS NULL)) AND id <> ALL(%s) "
        "ORDER BY key_version NULLS FIRST, id LIMIT %s FOR UPDATE SKIP LOCKED",
        (current, plain, list(skip), limit))
    return [(recorded(row), bytes(row["frame"])) for row in await cur.fetchall()]


async def reseal(conn: Conn, frames: Sequence[tuple[uuid.UUID, bytes]],
                 version: int) -> list[Recorded]:
    """Replace these frames (locked by :func:`to_reseal`) by their re-sealed bytes under
    ``version``, in one statement: a row changes bytes and version together."""
    if not frames:
        return []
    cur = await conn.execute(
        "UPDATE transcripts t SET frame = n.frame, key_version = %s, "
        "stored_bytes = octet_length(n.frame) "
        "FROM unnest(%s::uuid[], %s::bytea[]) AS n(id, frame) WHERE t.id = n.id "
        f"RETURNING {', '.join(f't.{c.strip()}' for c in _COLUMNS.split(','))}, "
        "sha256(t.frame) AS frame_sha256",
        (version, [i for i, _ in frames], [f for _, f in frames]))
    return [recorded(row) for row in await cur.fetchall()]
