"""The records a spoke-memory read may touch, in SQL (migration 0023): the listing page of
``memory.records.list`` (with its count and state digest) and the restriction
``memory.recall`` hands to the native recall (:mod:`.recall`). Called by the service's
``spoke_reading`` only.

A :class:`Reach` is the caller's coverage already narrowed by the request: one
:class:`Box` per live grant (subjects, contexts, shared placement), the request's subject,
selection and provenance folded in by the service. Each box becomes one arm of an OR of
plain conditions on ``memory_records`` (``subject_id = ANY(...)``, ``context_id =
ANY(...)``, ``context_id IS NULL``), which the placement and context indexes answer as a
bitmap OR: a read costs the records it may see, not the space.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql

from attested_cortex.store.database import Conn
from attested_cortex.store.spoke.memory import SEALED_RECORD, opened

Row = dict[str, Any]


@dataclass(frozen=True)
class Box:
    """Records of ``subjects`` (None: every subject) at ``contexts`` (None: every context;
    ``()``: none) and, with ``shared``, at the shared placement."""

    subjects: tuple[str, ...] | None
    contexts: tuple[str, ...] | None
    shared: bool


@dataclass(frozen=True)
class Reach:
    """The live records of ``space_id`` within any of ``boxes`` whose source context is one
    of ``sources`` (None: any)."""

    space_id: str
    boxes: tuple[Box, ...]
    sources: tuple[str, ...] | None = None


def _box(box: Box, n: int, params: dict[str, Any]) -> sql.Composable:
    """One arm: the box's subjects AND its placements."""
    parts: list[sql.Composable] = []
    if box.subjects is not None:
        params[f"reach_s{n}"] = list(box.subjects)
        parts.append(sql.SQL("r.subject_id = ANY({})").format(sql.Placeholder(f"reach_s{n}")))
    places: list[sql.Composable] = []
    if box.contexts is None and not box.shared:
        places.append(sql.SQL("r.context_id IS NOT NULL"))
    elif box.contexts:
        params[f"reach_c{n}"] = list(box.contexts)
        places.append(sql.SQL("r.context_id = ANY({})").format(sql.Placeholder(f"reach_c{n}")))
    if box.shared and box.contexts is not None:
        places.append(sql.SQL("r.context_id IS NULL"))
    if places:
        parts.append(sql.SQL("({})").format(sql.SQL(" OR ").join(places)))
    return sql.SQL("({})").format(sql.SQL(" AND ").join(parts or [sql.SQL("true")]))


def where(reach: Reach) -> tuple[sql.Composable, dict[str, Any]]:
    """The condition on ``memory_records r`` and its parameters (``reach`` with boxes)."""
    params: dict[str, Any] = {"reach_space": reach.space_id}
    arms = [_box(box, n, params) for n, box in enumerate(reach.boxes)]
    found: list[sql.Composable] = [
        sql.SQL("r.space_id = {}").format(sql.Placeholder("reach_space")),
        sql.SQL("({})").format(sql.SQL(" OR ").join(arms))]
    if reach.sources is not None:
        params["reach_sources"] = list(reach.sources)
        found.append(sql.SQL("r.source_context_id = ANY({})").format(
            sql.Placeholder("reach_sources")))
    return sql.SQL(" AND ").join(found), params


@dataclass(frozen=True)
class Page:
    """A listing page: the records (``limit`` at most, in order), whether more follow, how
    many the reach holds and an order-free digest of their ids and revisions."""

    records: list[Row]
    more: bool
    total: int
    state: str


#: ``t``: the set's count and an order-free digest of its ids and revisions (XOR of 64-bit
#: hashes: a change of the set changes it), from the live-record indexes alone (revision
#: and tombstone are copies on the side row); ``p``: the page after the cursor's position,
#: a walk of the same indexes in order that stops at the page's end, then read whole.
_PAGE = """
WITH t AS (
    SELECT count(*) AS total,
           coalesce(bit_xor(uuid_hash_extended(r.memory_id, r.revision)), 0)::text AS state
    FROM memory_records r WHERE r.deleted_at IS NULL AND {where}
), p AS (
    SELECT r.memory_id FROM memory_records r
    WHERE r.deleted_at IS NULL AND {where} {after}
    ORDER BY r.created_at, r.memory_id LIMIT %(limit)s
)
SELECT t.total, t.state, x.* FROM t LEFT JOIN LATERAL (
    SELECT {record} FROM p JOIN memory_records r ON r.memory_id = p.memory_id
    JOIN memories m ON m.id = r.memory_id
) x ON true
ORDER BY x.created_at, x.memory_id
"""


def page_statement(reach: Reach, *, after: tuple[datetime, uuid.UUID] | None,
                   limit: int) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement of :func:`page` and its parameters (``limit + 1`` rows at most)."""
    condition, params = where(reach)
    keyset: sql.Composable = sql.SQL("")
    if after is not None:
        keyset = sql.SQL("AND (r.created_at, r.memory_id) > ({}, {})").format(
            sql.Placeholder("after_at"), sql.Placeholder("after_id"))
        params.update(after_at=after[0], after_id=after[1])
    return sql.SQL(_PAGE).format(where=condition, record=sql.SQL(SEALED_RECORD), after=keyset), {
        **params, "limit": limit + 1}


async def page(conn: Conn, reach: Reach, *, after: tuple[datetime, uuid.UUID] | None,
               limit: int) -> Page:
    """The records of ``reach`` after ``after`` in (created_at, id) order, with the count
    and the digest of the whole reach: one statement."""
    statement, params = page_statement(reach, after=after, limit=limit)
    # Never prepared: a cached generic plan cannot see how many records the arrays reach
    # (the whole space or a context of it), and chose worse for the whole space at 10k.
    cur = await conn.execute(statement, params, prepare=False)
    rows = await cur.fetchall()
    total, state = rows[0]["total"], rows[0]["state"]
    found = [r for r in rows if r["memory_id"] is not None]
    for row in found:
        del row["total"], row["state"]
        opened(conn, row)  # a sealed memory's text (ADR 0065)
    return Page(found[:limit], len(found) > limit, total, state)


def restriction(conn: Conn, reach: Reach) -> tuple[str, dict[str, Any]]:
    """``AND`` the memory ``m`` is a record of ``reach``: the condition the native recall
    adds to its candidate lists (its parameters are all named ``reach_*``)."""
    condition, params = where(reach)
    text = sql.SQL(" AND EXISTS (SELECT 1 FROM memory_records r WHERE r.memory_id = m.id"
                   " AND r.deleted_at IS NULL AND {})").format(condition).as_string(conn)
    return text, params
