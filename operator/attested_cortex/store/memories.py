"""Memory rows: insert, read, update, tombstone, list. Called by the service layer only.

Every function takes a connection the caller already holds (inside a transaction for
writes), so one operation's writes, its graph mirror and its audit event commit together.
On a connection with a sealing :class:`.memory_ciphers.MemoryCipher` (``encryption.at_rest``
on, ADR 0056 item 5) rows are written sealed with keyed search tokens; a sealed row is
opened wherever it is read, with any bound cipher (:func:`memory_from_row`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from attested_cortex.errors import ConflictError, NotFoundError, TooLargeError
from attested_cortex.store import binary_copy as bc
from attested_cortex.store import written
from attested_cortex.store.database import Conn
from attested_cortex.store.events import (
    PendingEvent,
    seal_appended,
    sealed,
    translating_events,
)
from attested_cortex.store.memory_ciphers import (
    MemoryCipher,
    cipher_of,
    lexemes,
    open_row,
    plaintext,
    sealing,
    vectors,
)
from attested_cortex.store.outbox import OutboxEvent
from attested_cortex.store.written import WrittenBy

_COLUMNS = (
    "id, namespace, title, content, tags, metadata, author, revision, "
    f"created_at, updated_at, deleted_at, key_version, sealed, {written.COLUMNS}"
)
#: The columns :func:`memory_from_row` reads (the deep audit scans with them).
COLUMNS = _COLUMNS


@dataclass(frozen=True)
class Memory:
    """One stored memory (a tombstone has ``deleted_at`` set and empty content)."""

    id: uuid.UUID
    namespace: str
    title: str
    content: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    author: str
    revision: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    #: A sealed row that does not open (altered, moved, or its key version not in the ring):
    #: its title, content and metadata read empty.
    unreadable: bool = False
    #: Sealed at rest (ADR 0065): the key version and the SHA-256 of the sealed value as
    #: stored (what its write record covers, so the deep audit needs no key); None: plain.
    key_version: int | None = None
    sealed_sha256: bytes | None = None
    #: The tier and effective scopes of the request that last wrote it (migration 0021);
    #: None: written before.
    written_tier: str | None = None
    written_scopes: tuple[str, ...] | None = None
    #: Its Allow summary (migration 0040, ADR 0124); None: written before, or not by a request.
    written_allowed: tuple[str, ...] | None = None

    @property
    def deleted(self) -> bool:
        """Whether this memory is a tombstone."""
        return self.deleted_at is not None


def memory_from_row(row: dict[str, Any], cipher: MemoryCipher | None = None) -> Memory:
    """Build a :class:`Memory` from a dict row with the standard columns, a sealed one
    opened with ``cipher`` (without one, or not opening: empty and ``unreadable``)."""
    title, content, metadata, unreadable = row["title"], row["content"], row["metadata"], False
    digest = None
    if row.get("key_version") is not None:
        opened = open_row(cipher, row)
        title, content, metadata = opened.title, opened.content, opened.metadata
        unreadable = opened.unreadable
        digest = hashlib.sha256(row["sealed"]).digest()
    return Memory(
        id=row["id"], namespace=row["namespace"], title=title,
        content=content, tags=tuple(row["tags"]), metadata=metadata,
        author=row["author"], revision=row["revision"], created_at=row["created_at"],
        updated_at=row["updated_at"], deleted_at=row["deleted_at"], unreadable=unreadable,
        key_version=row.get("key_version"), sealed_sha256=digest, **written.fields(row),
    )


@dataclass(frozen=True, slots=True)
class Stored:
    """What a write puts in a row's text columns: the values plain, or empty beside the
    sealed value, its key version and its keyed search vector."""

    title: str
    content: str
    metadata: Jsonb
    key_version: int | None = None
    sealed: bytes | None = None
    search: str | None = None

    @property
    def sealed_sha256(self) -> bytes | None:
        """The digest a sealed row's write record covers (None: plain)."""
        return None if self.sealed is None else hashlib.sha256(self.sealed).digest()


#: The record event of a one-statement store, from what the row will hold (a sealed row's
#: record covers its sealed value: :func:`attested_cortex.attest.records.memory_record`).
EventFn = Callable[[Stored], PendingEvent]


async def stored_values(conn: Conn, rows: Sequence[tuple[uuid.UUID, str, str, Sequence[str],
                                                         dict[str, Any]]]) -> list[Stored]:
    """What each (id, title, content, tags, metadata) is written as on ``conn``: plain, or
    (a sealing cipher bound) sealed, its lexemes computed by PostgreSQL in a SELECT that
    writes nothing and keyed here (one round trip for all of them)."""
    cipher = sealing(conn)
    if cipher is None:
        return [Stored(t, c, Jsonb(m)) for _, t, c, _, m in rows]
    found = await lexemes(conn, [(t, c, tags) for _, t, c, tags, _ in rows])
    version = cipher.version
    return [Stored("", "", Jsonb({}), version, cipher.seal(i, plaintext(t, c, m)),
                   cipher.key_text(search, version))
            for (i, t, c, _, m), search in zip(rows, found, strict=True)]


def _from_row(conn: Conn, row: dict[str, Any]) -> Memory:
    return memory_from_row(row, cipher_of(conn))


async def insert(
    conn: Conn, *, namespace: str, title: str, content: str, tags: Sequence[str],
    metadata: dict[str, Any], author: str, memory_id: uuid.UUID | None = None,
    by: WrittenBy | None = None,
) -> Memory:
    """Insert a new memory and return it. Its audit record is appended after it, in the
    same transaction (the chain lock last: docs/adr/0017)."""
    row_id = memory_id or uuid.uuid4()
    (v,) = await stored_values(conn, [(row_id, title, content, tags, metadata)])
    cur = await conn.execute(
        f"INSERT INTO memories ({_INSERTED}) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s, %s) "
        f"RETURNING {_COLUMNS}",
        (row_id, namespace, v.title, v.content, list(tags), v.metadata, author,
         v.key_version, v.sealed, v.search, *written.params(by)))
    row = await cur.fetchone()
    assert row is not None
    return _from_row(conn, row)


#: The columns a write fills (``search``: NULL for a plain row, the trigger computes it).
_INSERTED = ("id, namespace, title, content, tags, metadata, author, key_version, sealed, "
             f"search, {written.COLUMNS}")


async def insert_recorded(
    conn: Conn, *, namespace: str, title: str, content: str, tags: Sequence[str],
    metadata: dict[str, Any], author: str, memory_id: uuid.UUID,
    event: PendingEvent | EventFn, adds: int, cap: int, by: WrittenBy | None = None,
    outbox_event: OutboxEvent | None = None,
) -> Memory:
    """Insert a new memory and append its audit ``event`` in one statement (one round trip,
    atomic without an explicit transaction), in the lock order of every write: the author's
    usage row first (locked, and the cap checked, by ``cortex_reserve_bytes``), the chain
    lock last (the append, fed by the inserted row). Past ``cap``: :class:`CapReachedError`.
    With ``outbox_event`` its outbox row is inserted too, fed by the record (so after the
    chain lock: migration 0038), its times replaced by the row's.

    On a sealed connection (the keyed chain, migration 0014) the MAC must be inserted before
    the chain lock is released, so the statement runs in a transaction, pipelined: BEGIN and
    the statement in one round trip, the MAC and COMMIT in a second."""
    keyed = sealed(conn)
    (v,) = await stored_values(conn, [(memory_id, title, content, tags, metadata)])
    if not isinstance(event, PendingEvent):
        event = event(v)
    query = (
        "WITH u AS (SELECT cortex_reserve_bytes(%s, %s, %s) AS used), "
        f"m AS (INSERT INTO memories ({_INSERTED}) "
        f"SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s, %s FROM u "
        f"RETURNING {_COLUMNS}), "
        "e AS (INSERT INTO signed_events (agent_id, event_type, payload, signature, "
        "key_fingerprint) SELECT %s, %s, %s, %s, %s FROM m RETURNING sequence, hash, "
        "prev_mac)" + (_OUTBOX_CTE if outbox_event is not None else "")
        + (" SELECT m.*, e.sequence AS chain_sequence, "
           "e.hash AS chain_hash, e.prev_mac AS chain_prev_mac FROM m, e" if keyed
           else " SELECT * FROM m"))
    params = (author, adds, cap, memory_id, namespace, v.title, v.content, list(tags),
              v.metadata, author, v.key_version, v.sealed, v.search, *written.params(by),
              *event.params(), *(outbox_event.params() if outbox_event is not None else ()))
    try:
        with translating_events(event):
            if not keyed:
                row = await (await conn.execute(query, params)).fetchone()
            else:
                row = await _sealed_in_two_round_trips(conn, query, params)
    except psycopg.Error as exc:  # the rest: the connection scope's translation
        if exc.sqlstate == CAP_REACHED:
            raise CapReachedError(int(exc.diag.message_detail or 0)) from exc
        raise
    assert row is not None
    return _from_row(conn, row)


def _iso(column: str) -> str:
    """SQL rendering the instant ``column`` as the API does (Python's ``isoformat`` of a UTC
    datetime: six fraction digits, none when the fraction is zero, ``+00:00``), so an
    outbox event and the answer to its write print the same time. ``to_jsonb`` would print
    PostgreSQL's own form (``.15227``: trailing zeros cut)."""
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (f"to_jsonb(to_char({utc}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN "
            f"date_trunc('second', {utc}) = {utc} THEN '' ELSE to_char({utc}, '.US') END "
            "|| '+00:00')")


#: The outbox row of a one-statement store: after the record (``FROM e``), so its sequence
#: is taken under the chain lock; the times are the row's, printed as the API prints them.
_OUTBOX_CTE = (", o AS (INSERT INTO outbox_events (event, key, namespace, payload) "
               "SELECT %s, %s, %s, jsonb_set(jsonb_set(%s::jsonb, '{created_at}', "
               f"{_iso('m.created_at')}), '{{updated_at}}', {_iso('m.updated_at')}) "
               "FROM m, e)")


async def _sealed_in_two_round_trips(conn: Conn, query: str, params: tuple[Any, ...]
                                     ) -> dict[str, Any] | None:
    """BEGIN and the statement in one round trip; the MAC and COMMIT in a second (psycopg's
    ``transaction()`` inside a pipeline syncs at COMMIT and again at the pipeline's end:
    three). On any error the transaction is rolled back before the connection goes back."""
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            row = await (await conn.execute(query, params)).fetchone()
            assert row is not None
            await seal_appended(conn, [(row["chain_sequence"], row["chain_hash"],
                                        row["chain_prev_mac"])])
            await conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        raise
    return row


@dataclass(frozen=True)
class NewMemory:
    """One row of :func:`insert_many`."""

    id: uuid.UUID
    namespace: str
    title: str
    content: str
    tags: Sequence[str]
    metadata: dict[str, Any]


async def insert_many(conn: Conn, memories: Sequence[NewMemory], *, author: str,
                      by: WrittenBy | None = None) -> list[Memory]:
    """Insert ``memories`` (one author's) in one COPY and return them as written, in order:
    one statement, so one run of the usage trigger for the whole batch (the author's usage
    row is locked once, at its end), and the cheapest way PostgreSQL takes rows (a third
    less than one INSERT over unnested arrays for 1,000 memories, docs/adr/0044). Inside
    the caller's transaction; the batch's records are appended after it (the chain lock
    last: docs/adr/0017). On a sealing connection: :func:`_insert_sealed` (its binary COPY
    sends text as UTF-8 and keys the vectors' bytes as UTF-8, as the text forms are keyed:
    on a connection in another client encoding, rare, a sealed batch takes the text COPY
    below and reads its rows back opened)."""
    cipher = sealing(conn)
    if cipher is not None and memories and conn.info.encoding == "utf-8":
        return await _insert_sealed(conn, cipher, memories, author=author, by=by)
    values = await stored_values(
        conn, [(m.id, m.title, m.content, m.tags, m.metadata) for m in memories])
    tier, scopes, allowed = written.params(by)
    scopes_literal = None if scopes is None else array_literal(scopes)  # the same each row
    allowed_literal = None if allowed is None else array_literal(allowed)
    copying = f"COPY memories ({_INSERTED}) FROM STDIN"
    async with conn.cursor() as cur, cur.copy(copying) as copy:
        for m, v in zip(memories, values, strict=True):
            await copy.write_row((m.id, m.namespace, v.title, v.content, array_literal(m.tags),
                                  v.metadata, author, v.key_version, v.sealed, v.search,
                                  tier, scopes_literal, allowed_literal))
    stored = {m.id: m for m in await get_many(conn, [m.id for m in memories])}
    return [stored[m.id] for m in memories]


#: The number of columns in :data:`_INSERTED`: the field count of each binary COPY row.
_INSERTED_COUNT = len(_INSERTED.split(","))
#: What :func:`_insert_sealed` reads back of a sealed batch: what PostgreSQL sets.
_SET_COLUMNS = "id, revision, created_at, updated_at, deleted_at"


async def _insert_sealed(conn: Conn, cipher: MemoryCipher, memories: Sequence[NewMemory], *,
                         author: str, by: WrittenBy | None) -> list[Memory]:
    """A sealed batch (issue 27: the batch cost of sealing, ADR 0065) in one binary COPY.

    The vectors PostgreSQL computes come back in their binary form and are keyed in it, so
    a keyed vector goes into the COPY without ``tsvectorin``'s parse, and the sealed value
    as its bytes rather than hex (:mod:`.binary_copy`). The answer is built from the request
    just sealed (what a later read opens, the same JSON values) and what PostgreSQL set
    (revision, times) read back: title, content and metadata are never read back and
    opened, nor the namespace, tags, author and writer this function wrote."""
    found = await vectors(conn, [(m.title, m.content, m.tags) for m in memories])
    version = cipher.version
    tier, scopes, allowed = written.params(by)
    # the fields of _INSERTED; those every row shares: empty title and content; metadata
    # {}, author, version; the writer's tier and scopes
    blank = bc.text("") * 2
    shared = bc.jsonb("{}") + bc.text(author) + bc.int4(version)
    writer = ((bc.NULL if tier is None else bc.text(tier))
              + (bc.NULL if scopes is None else bc.text_array(scopes))
              + (bc.NULL if allowed is None else bc.text_array(allowed)))
    sealed = [cipher.seal(m.id, plaintext(m.title, m.content, m.metadata)) for m in memories]
    rows = [bc.row(_INSERTED_COUNT, (
        bc.uuid_(m.id), bc.text(m.namespace), blank, bc.text_array(m.tags), shared,
        bc.field(value), bc.field(cipher.key_binary(vector, version)), writer))
        for m, value, vector in zip(memories, sealed, found, strict=True)]
    async with conn.cursor() as cur, cur.copy(
            f"COPY memories ({_INSERTED}) FROM STDIN (FORMAT BINARY)") as copy:
        await copy.write(b"".join([bc.HEADER, *rows, bc.TRAILER]))
    cur = await conn.execute(f"SELECT {_SET_COLUMNS} FROM memories WHERE id = ANY(%s)",
                             ([m.id for m in memories],))
    set_by = {row["id"]: row for row in await cur.fetchall()}
    written_scopes = written.scopes_of(scopes)
    return [Memory(
        id=m.id, namespace=m.namespace, title=m.title, content=m.content, tags=tuple(m.tags),
        metadata=m.metadata, author=author, revision=r["revision"],
        created_at=r["created_at"], updated_at=r["updated_at"], deleted_at=r["deleted_at"],
        key_version=version, sealed_sha256=hashlib.sha256(value).digest(), written_tier=tier,
        written_scopes=written_scopes, written_allowed=written.scopes_of(allowed))
        for m, value in zip(memories, sealed, strict=True) for r in (set_by[m.id],)]


def array_literal(values: Sequence[str]) -> str:
    """A ``text[]`` value as PostgreSQL's array input reads it, each element quoted (so a
    comma, brace, space, quote, backslash or the word NULL in a tag is just text): what a
    batch's COPY sends for its array columns, five times cheaper than psycopg's list dumper
    per row (a sixth of a 1,000-memory batch's server time, docs/adr/0075)."""
    return "{" + ",".join(
        '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values) + "}"


#: The SQLSTATE of ``cortex_reserve_bytes`` past the cap (migration 0010).
CAP_REACHED = "CX413"


class CapReachedError(TooLargeError):
    """The author's stored bytes would pass the cap; ``used`` is what it stores now."""

    def __init__(self, used: int) -> None:
        super().__init__("the storage quota is exceeded", code="storage_quota_exceeded",
                         used=used)
        self.used = used


async def get(conn: Conn, memory_id: uuid.UUID, *, for_update: bool = False) -> Memory:
    """The memory with ``memory_id`` (tombstones included); NotFoundError if absent."""
    lock = " FOR UPDATE" if for_update else ""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = %s{lock}", (memory_id,))
    row = await cur.fetchone()
    if row is None:
        raise NotFoundError(f"memory {memory_id} does not exist", id=str(memory_id))
    return _from_row(conn, row)


async def get_many(conn: Conn, ids: Sequence[uuid.UUID]) -> list[Memory]:
    """The memories among ``ids`` that exist (tombstones included), in the order of ``ids``."""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ANY(%s)",
                             (list(ids),))
    found = {row["id"]: _from_row(conn, row) for row in await cur.fetchall()}
    return [found[i] for i in ids if i in found]


async def update(
    conn: Conn, current: Memory, *, changes: dict[str, Any],
    expected_revision: int | None = None, by: WrittenBy | None = None,
) -> Memory:
    """Apply ``changes`` (title, content, tags, metadata) and bump the revision.

    ``current`` must have been read ``FOR UPDATE`` in this transaction. A tombstone cannot
    be updated, and an ``expected_revision`` that is not the current one is a conflict.
    """
    if current.deleted:
        raise ConflictError(f"memory {current.id} is deleted", id=str(current.id))
    if expected_revision is not None and expected_revision != current.revision:
        raise ConflictError(
            f"memory {current.id} is at revision {current.revision}, not {expected_revision}",
            id=str(current.id), revision=current.revision,
        )
    tags = list(changes.get("tags", current.tags))
    (v,) = await stored_values(conn, [(
        current.id, changes.get("title", current.title),
        changes.get("content", current.content), tags,
        changes.get("metadata", current.metadata))])
    tier, scopes, allowed = written.params(by)
    cur = await conn.execute(
        "UPDATE memories SET title = %(title)s, content = %(content)s, tags = %(tags)s, "
        "metadata = %(metadata)s, key_version = %(key_version)s, sealed = %(sealed)s, "
        "search = %(search)s::tsvector, revision = revision + 1, "
        "updated_at = clock_timestamp(), written_tier = %(tier)s, written_scopes = %(scopes)s, "
        "written_allowed = %(allowed)s "
        f"WHERE id = %(id)s RETURNING {_COLUMNS}",
        {"title": v.title, "content": v.content, "tags": tags, "metadata": v.metadata,
         "key_version": v.key_version, "sealed": v.sealed, "search": v.search,
         "id": current.id, "tier": tier, "scopes": scopes, "allowed": allowed},
    )
    row = await cur.fetchone()
    assert row is not None
    return _from_row(conn, row)


async def tombstone(conn: Conn, current: Memory, *, by: WrittenBy | None = None) -> Memory:
    """Delete a memory's content and keep its row; deleting twice is a no-op."""
    if current.deleted:
        return current
    cur = await conn.execute(
        "UPDATE memories SET content = '', title = '', tags = '{}', metadata = '{}'::jsonb, "
        "key_version = NULL, sealed = NULL, revision = revision + 1, "
        "deleted_at = clock_timestamp(), updated_at = clock_timestamp(), "
        "written_tier = %s, written_scopes = %s, written_allowed = %s "
        f"WHERE id = %s RETURNING {_COLUMNS}",
        (*written.params(by), current.id),
    )
    row = await cur.fetchone()
    assert row is not None
    return _from_row(conn, row)


#: What one row weighs in an answer, in UTF-8 bytes (JSON spells it at least as long).
_ROW_BYTES = ("octet_length(content) + octet_length(title) + octet_length(metadata::text) "
              "+ octet_length(array_to_string(tags, '')) + coalesce(octet_length(sealed), 0)")


@dataclass(frozen=True)
class Listed:
    """One page of a listing and whether rows follow it (past ``limit`` or the bytes);
    ``records``: which of its memories are spoke-memory records (ADR 0083), read by the
    same statement."""

    memories: list[Memory]
    more: bool
    records: frozenset[uuid.UUID] = frozenset()


async def list_namespace(
    conn: Conn, *, namespace: str | None, limit: int, include_children: bool = True,
    before: tuple[datetime, uuid.UUID] | None = None, max_bytes: int | None = None,
) -> Listed:
    """Live memories of a namespace (and its children), newest first by creation, after
    ``before`` (a listing cursor). With ``max_bytes`` the rows stop once their text passes
    it (the first row always comes), so a page of large memories is never read whole."""
    where = ["deleted_at IS NULL"]
    params: list[Any] = []
    if namespace is not None:
        if include_children:
            where.append("(namespace = %s OR namespace LIKE %s)")
            params += [namespace, _like_prefix(namespace) + "/%"]
        else:
            where.append("namespace = %s")
            params.append(namespace)
    if before is not None:
        where.append("(created_at, id) < (%s, %s)")
        params += list(before)
    # the windows run over the page only (after LIMIT): the bytes ahead of each row, and
    # how many rows the page had before the byte cut (limit + 1: whether more follow)
    cur = await conn.execute(
        "SELECT *, EXISTS (SELECT 1 FROM memory_records r WHERE r.memory_id = weighed.id)"
        " AS is_record FROM (SELECT *, sum(row_bytes) OVER (ORDER BY created_at DESC, id DESC) "
        "- row_bytes AS ahead, count(*) OVER () AS page_rows "
        f"FROM (SELECT {_COLUMNS}, {_ROW_BYTES} AS row_bytes FROM memories "
        f"WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT %s) page) "
        "weighed WHERE %s::bigint IS NULL OR ahead = 0 OR ahead < %s::bigint "
        "ORDER BY created_at DESC, id DESC LIMIT %s",
        [*params, limit + 1, max_bytes, max_bytes, limit],
    )
    found = await cur.fetchall()
    more = bool(found) and int(found[0]["page_rows"]) > len(found)
    records = frozenset(r["id"] for r in found if r["is_record"])
    return Listed([_from_row(conn, r) for r in found], more, records)


def _like_prefix(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


#: What an author's memories count against its storage quota: namespace, title, content,
#: tags and (non-empty) metadata of the live ones, and a sealed row's sealed bytes (the SQL
#: function of migrations 0010 and 0020, which the usage triggers also call).
MEMORY_BYTES = ("coalesce(sum(cortex_memory_bytes(namespace, content, title, tags, metadata, "
                "deleted_at, sealed)), 0)")


async def stored_bytes(conn: Conn, *, author: str) -> int:
    """Bytes the author's live memories count against the storage quota (:data:`MEMORY_BYTES`;
    tombstones hold none)."""
    cur = await conn.execute(
        f"SELECT {MEMORY_BYTES} AS used FROM memories WHERE author = %s AND deleted_at IS NULL",
        (author,))
    row = await cur.fetchone()
    return int(row["used"]) if row is not None else 0


async def namespaces_of(conn: Conn, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The namespace of each existing memory among ``ids`` (tombstones included)."""
    cur = await conn.execute("SELECT id, namespace FROM memories WHERE id = ANY(%s)",
                             (list(ids),))
    return {row["id"]: row["namespace"] for row in await cur.fetchall()}
