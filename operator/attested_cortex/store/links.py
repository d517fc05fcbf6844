"""Links between memories: create, read, list and invalidate; never delete.

Called by the service layer (POST /v1/links, GET /v1/links/..., POST /v1/kg/invalidate) with a
psycopg ``AsyncConnection`` already inside a transaction. Every write is mirrored into the live
graph backend on the same connection, so a failed write leaves neither side changed.

Rules (documented in docs/graph.md):

* relation: one of ``BUILTIN_RELATIONS`` or a custom name matching ``x-[a-z0-9_]{1,60}``;
* self-links are refused (400);
* a second *open* link with the same (src, dst, relation) is refused (409, details carry the
  existing id); closed windows may repeat, so a relation can be re-asserted after invalidation;
* ``valid_until`` must be after ``valid_from`` (400); invalidation only ever closes a window;
* both endpoints must be live memories (404 for unknown or tombstoned ids).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row, tuple_row

from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.store.written import WrittenBy, params, scopes_of

if TYPE_CHECKING:
    from attested_cortex.store.graph.base import GraphBackend

BUILTIN_RELATIONS: Final = frozenset({"related_to", "supersedes", "contradicts", "derived_from"})
CUSTOM_RELATION_PATTERN: Final = re.compile(r"x-[a-z0-9_]{1,60}")

COLUMNS: Final = (
    "id, src_id, dst_id, relation, valid_from, valid_until, observed_by, signature,"
    " attest_level, signed_by, signed_at, created_at, asserted_until, written_tier,"
    " written_scopes, written_allowed"
)


@dataclass(frozen=True)
class Link:
    """One stored link; ``valid_until`` None means the window is still open."""

    id: uuid.UUID
    src_id: uuid.UUID
    dst_id: uuid.UUID
    relation: str
    valid_from: datetime
    valid_until: datetime | None
    observed_by: str
    signature: bytes | None
    attest_level: str
    signed_by: str | None
    signed_at: datetime | None
    created_at: datetime
    #: The window's end as created (and signed); invalidation changes only ``valid_until``.
    asserted_until: datetime | None = None
    #: The tier and effective scopes of the request that last wrote it (migration 0021).
    written_tier: str | None = None
    written_scopes: tuple[str, ...] | None = None
    #: Its Allow summary (migration 0040, ADR 0124); None: written before, or not by a request.
    written_allowed: tuple[str, ...] | None = None



def check_relation(relation: str) -> str:
    """Return ``relation`` if it is a built-in or a well-formed custom name, else raise 400."""
    if relation in BUILTIN_RELATIONS or CUSTOM_RELATION_PATTERN.fullmatch(relation):
        return relation
    raise InvalidInputError(
        f"unknown relation {relation!r}: use one of {sorted(BUILTIN_RELATIONS)} "
        "or a custom name matching x-[a-z0-9_]{1,60}",
        field="relation",
    )


def check_window(valid_from: datetime | None, valid_until: datetime | None) -> None:
    """Refuse naive timestamps and windows that close before they open (400)."""
    for field, value in (("valid_from", valid_from), ("valid_until", valid_until)):
        if value is not None and value.tzinfo is None:
            raise InvalidInputError(f"{field} needs a time zone offset", field=field)
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        raise InvalidInputError("valid_until must be after valid_from", field="valid_until")


def link_from_row(row: dict[str, Any]) -> Link:
    """Build a Link from a ``SELECT COLUMNS`` row (dict_row)."""
    signature = row["signature"]
    return Link(**{**row, "signature": bytes(signature) if signature is not None else None,
                   "written_scopes": scopes_of(row.get("written_scopes")),
                   "written_allowed": scopes_of(row.get("written_allowed"))})


async def fetch_tuples(
    conn: psycopg.AsyncConnection[Any], sql: str, params: Any = None
) -> list[tuple[Any, ...]]:
    """Run one statement and return tuple rows, whatever the connection's row factory."""
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def require_live_memories(conn: psycopg.AsyncConnection[Any], *ids: uuid.UUID) -> None:
    """Raise 404 unless every id names a memory that exists and is not tombstoned."""
    rows = await fetch_tuples(
        conn, "SELECT id FROM memories WHERE id = ANY(%s) AND deleted_at IS NULL", (list(ids),)
    )
    check_live(ids, found=[row[0] for row in rows])


def check_live(ids: Iterable[uuid.UUID], *, found: Iterable[uuid.UUID]) -> None:
    """Raise 404 naming the first of ``ids`` that is not among the ``found`` live memories."""
    live = set(found)
    missing = [str(i) for i in ids if i not in live]
    if missing:
        raise NotFoundError(f"no live memory with id {missing[0]}", memory_id=missing[0])


async def create_link(
    conn: psycopg.AsyncConnection[Any],
    *,
    graph: GraphBackend,
    src_id: uuid.UUID,
    dst_id: uuid.UUID,
    relation: str,
    observed_by: str,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    link_id: uuid.UUID | None = None,
    signature: bytes | None = None,
    attest_level: str = "unsigned",
    signed_by: str | None = None,
    signed_at: datetime | None = None,
    by: WrittenBy | None = None,
) -> Link:
    """Store a new link and mirror it into ``graph``; see the module docstring for the rules.

    ``link_id`` lets a client choose the id (a used id is a 409 replay); the signature
    fields come from the service layer's attestation step.
    """
    check_relation(relation)
    check_window(valid_from, valid_until)
    if src_id == dst_id:
        raise InvalidInputError("a memory cannot link to itself", field="dst_id")
    await require_live_memories(conn, src_id, dst_id)
    link = await _insert(conn, id=link_id, src_id=src_id, dst_id=dst_id, relation=relation,
                         observed_by=observed_by, valid_from=valid_from, valid_until=valid_until,
                         signature=signature, attest_level=attest_level, signed_by=signed_by,
                         signed_at=signed_at, written_tier=params(by)[0],
                         written_scopes=params(by)[1],
                         written_allowed=params(by)[2])
    await graph.on_link_created(conn, link)
    return link


async def _insert(conn: psycopg.AsyncConnection[Any], **values: Any) -> Link:
    sql = (
        "INSERT INTO links (id, src_id, dst_id, relation, observed_by, valid_from, valid_until,"
        " asserted_until, signature, attest_level, signed_by, signed_at, written_tier,"
        " written_scopes, written_allowed)"
        " VALUES (coalesce(%(id)s, gen_random_uuid()), %(src_id)s, %(dst_id)s, %(relation)s,"
        " %(observed_by)s, coalesce(%(valid_from)s, now()), %(valid_until)s, %(valid_until)s,"
        " %(signature)s, %(attest_level)s, %(signed_by)s, %(signed_at)s, %(written_tier)s,"
        " %(written_scopes)s, %(written_allowed)s)"
        f" RETURNING {COLUMNS}"
    )
    try:
        async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, values)
            row = await cur.fetchone()
    except pg_errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "links_pkey":
            raise ConflictError(f"link id {values['id']} was already used", code="replay",
                                link_id=str(values["id"])) from exc
        existing = await _open_duplicate(conn, **values)
        raise ConflictError(
            "an open link with the same src_id, dst_id and relation exists; invalidate it first",
            link_id=existing,
        ) from exc
    except pg_errors.CheckViolation as exc:
        raise InvalidInputError(
            "valid_until must be after valid_from", field="valid_until"
        ) from exc
    assert row is not None
    return link_from_row(row)


async def _open_duplicate(conn: psycopg.AsyncConnection[Any], **values: Any) -> str | None:
    rows = await fetch_tuples(
        conn,
        "SELECT id FROM links WHERE src_id = %(src_id)s AND dst_id = %(dst_id)s"
        " AND relation = %(relation)s AND valid_until IS NULL",
        values,
    )
    return str(rows[0][0]) if rows else None


async def get_link(conn: psycopg.AsyncConnection[Any], *, link_id: uuid.UUID) -> Link:
    """Return the link with ``link_id`` or raise 404."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(f"SELECT {COLUMNS} FROM links WHERE id = %s", (link_id,))
        row = await cur.fetchone()
    if row is None:
        raise NotFoundError(f"no link with id {link_id}", link_id=str(link_id))
    return link_from_row(row)


async def list_links(conn: psycopg.AsyncConnection[Any], *, memory_id: uuid.UUID) -> list[Link]:
    """Every link with ``memory_id`` at either end (history included), oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,))
        if await cur.fetchone() is None:
            raise NotFoundError(f"no memory with id {memory_id}", memory_id=str(memory_id))
        await cur.execute(
            f"SELECT {COLUMNS} FROM links WHERE src_id = %(m)s OR dst_id = %(m)s"
            " ORDER BY created_at, id",
            {"m": memory_id},
        )
        return [link_from_row(row) for row in await cur.fetchall()]


async def page_links(
    conn: psycopg.AsyncConnection[Any], *, memory_id: uuid.UUID, limit: int,
    after: tuple[datetime, uuid.UUID] | None = None,
) -> tuple[list[Link], bool]:
    """Up to ``limit`` links with ``memory_id`` at either end (history included), oldest
    first by ``(created_at, id)`` after ``after`` (a listing cursor), and whether more
    follow."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,))
        if await cur.fetchone() is None:
            raise NotFoundError(f"no memory with id {memory_id}", memory_id=str(memory_id))
        since = "" if after is None else " AND (created_at, id) > (%(at)s, %(id)s)"
        at, ident = after if after is not None else (None, None)
        await cur.execute(
            f"SELECT {COLUMNS} FROM links WHERE (src_id = %(m)s OR dst_id = %(m)s){since}"
            " ORDER BY created_at, id LIMIT %(n)s",
            {"m": memory_id, "at": at, "id": ident, "n": limit + 1},
        )
        found = [link_from_row(row) for row in await cur.fetchall()]
    return found[:limit], len(found) > limit


async def invalidate_link(
    conn: psycopg.AsyncConnection[Any],
    *,
    graph: GraphBackend,
    link_id: uuid.UUID,
    valid_until: datetime | None = None,
    by: WrittenBy | None = None,
) -> Link:
    """Close the link's window at ``valid_until`` (default: now) and mirror it into ``graph``.

    Raises 404 for an unknown id, 409 when the window is already closed, and 400 when
    ``valid_until`` is not after the link's ``valid_from``.
    """
    check_window(None, valid_until)
    current = await get_link(conn, link_id=link_id)
    if current.valid_until is not None:
        raise ConflictError(
            f"link {link_id} was already invalidated", link_id=str(link_id),
            valid_until=current.valid_until.isoformat(),
        )
    try:
        async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "UPDATE links SET valid_until = coalesce(%s, now()), written_tier = %s,"
                " written_scopes = %s, written_allowed = %s"
                f" WHERE id = %s AND valid_until IS NULL RETURNING {COLUMNS}",
                (valid_until, *params(by), link_id),
            )
            row = await cur.fetchone()
    except pg_errors.CheckViolation as exc:
        raise InvalidInputError(
            "valid_until must be after the link's valid_from", field="valid_until"
        ) from exc
    if row is None:
        raise ConflictError(f"link {link_id} was invalidated concurrently", link_id=str(link_id))
    link = link_from_row(row)
    await graph.on_link_invalidated(conn, link)
    return link
