"""Links: creation rules, duplicates, self-links, windows, invalidation, on both servers.

Runs on plain PostgreSQL 15 (CTE, nothing AGE-specific may be needed) and on PostgreSQL 17 +
AGE with each backend, where every write is mirrored into the graph.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.store import links
from attested_cortex.store.graph.age_setup import mirror_in_step
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.graph.cte import CteBackend
from tests.graph.corpus import T0, add_memories, tombstone

BAD_RELATIONS = ["", "foo", "x-", "X-foo", "x-Foo", "x-" + "a" * 61, "related to", "x-foo-bar",
                 "related_to ", "x-é"]
Conn = psycopg.AsyncConnection[Any]


async def _count(conn: Conn) -> int:
    return int((await links.fetch_tuples(conn, "SELECT count(*) FROM links"))[0][0])


async def _lifecycle(conn: Conn, graph: GraphBackend) -> None:
    a, b = await add_memories(conn, 2, graph=graph)
    made = await links.create_link(conn, graph=graph, src_id=a, dst_id=b,
                                   relation="x-cites_2", observed_by="agent-1")
    assert (made.attest_level, made.signature, made.valid_until) == ("unsigned", None, None)
    assert await links.get_link(conn, link_id=made.id) == made
    closed = await links.invalidate_link(conn, graph=graph, link_id=made.id,
                                         valid_until=made.valid_from + timedelta(seconds=1))
    assert closed.valid_until == made.valid_from + timedelta(seconds=1)
    assert await links.list_links(conn, memory_id=a) == [closed], "invalidation never deletes"
    with pytest.raises(ConflictError):
        await links.invalidate_link(conn, graph=graph, link_id=made.id)


async def test_lifecycle_on_plain_postgres(pg15_conn: Conn) -> None:
    await _lifecycle(pg15_conn, CteBackend())


async def test_lifecycle_on_age(age_conn: Conn, backend: GraphBackend) -> None:
    await _lifecycle(age_conn, backend)
    await age_conn.commit()
    assert await mirror_in_step(age_conn) == (backend.name == "age")


@pytest.mark.parametrize("relation", BAD_RELATIONS)
async def test_bad_relation_is_refused(age_conn: Conn, backend: GraphBackend,
                                       relation: str) -> None:
    a, b = await add_memories(age_conn, 2, graph=backend)
    with pytest.raises(InvalidInputError) as caught:
        await links.create_link(age_conn, graph=backend, src_id=a, dst_id=b, relation=relation,
                                observed_by="t")
    assert caught.value.details["field"] == "relation"
    assert await _count(age_conn) == 0


async def test_self_link_is_refused(pg15_conn: Conn) -> None:
    (a,) = await add_memories(pg15_conn, 1, graph=CteBackend())
    with pytest.raises(InvalidInputError):
        await links.create_link(pg15_conn, graph=CteBackend(), src_id=a, dst_id=a,
                                relation="related_to", observed_by="t")


async def test_unknown_or_tombstoned_ends_are_404(age_conn: Conn, backend: GraphBackend) -> None:
    a, b = await add_memories(age_conn, 2, graph=backend)
    await tombstone(age_conn, b, graph=backend)
    for src, dst in ((a, uuid.uuid4()), (uuid.uuid4(), a), (a, b), (b, a)):
        with pytest.raises(NotFoundError):
            await links.create_link(age_conn, graph=backend, src_id=src, dst_id=dst,
                                    relation="related_to", observed_by="t")
    for call in (links.get_link(age_conn, link_id=uuid.uuid4()),
                 links.list_links(age_conn, memory_id=uuid.uuid4()),
                 links.invalidate_link(age_conn, graph=backend, link_id=uuid.uuid4())):
        with pytest.raises(NotFoundError):
            await call


@pytest.mark.parametrize(("start", "end"), [(T0, T0), (T0, T0 - timedelta(hours=1)),
                                            (T0.replace(tzinfo=None), None),
                                            (None, datetime(2030, 1, 1))])
async def test_bad_windows_are_refused(pg15_conn: Conn, start: datetime | None,
                                       end: datetime | None) -> None:
    a, b = await add_memories(pg15_conn, 2, graph=CteBackend())
    with pytest.raises(InvalidInputError):
        await links.create_link(pg15_conn, graph=CteBackend(), src_id=a, dst_id=b,
                                relation="supersedes", observed_by="t",
                                valid_from=start, valid_until=end)
    assert await _count(pg15_conn) == 0


async def test_invalidate_before_valid_from_is_refused(pg15_conn: Conn) -> None:
    a, b = await add_memories(pg15_conn, 2, graph=CteBackend())
    made = await links.create_link(pg15_conn, graph=CteBackend(), src_id=a, dst_id=b,
                                   relation="supersedes", observed_by="t", valid_from=T0)
    for until in (T0, T0 - timedelta(days=1), T0.replace(tzinfo=None) + timedelta(days=1)):
        with pytest.raises(InvalidInputError):
            await links.invalidate_link(pg15_conn, graph=CteBackend(), link_id=made.id,
                                        valid_until=until)
    assert (await links.get_link(pg15_conn, link_id=made.id)).valid_until is None


async def test_duplicates_open_conflict_closed_repeat(age_conn: Conn,
                                                      backend: GraphBackend) -> None:
    a, b = await add_memories(age_conn, 2, graph=backend)
    args: dict[str, Any] = {"graph": backend, "src_id": a, "dst_id": b, "observed_by": "t"}
    first = await links.create_link(age_conn, relation="related_to", **args)
    with pytest.raises(ConflictError) as caught:
        await links.create_link(age_conn, relation="related_to", **args)
    assert caught.value.details["link_id"] == str(first.id)
    await links.create_link(age_conn, relation="contradicts", **args)  # parallel edge
    await links.create_link(age_conn, relation="related_to", valid_from=T0,
                            valid_until=T0 + timedelta(days=1), **args)  # closed history
    assert len(await links.list_links(age_conn, memory_id=a)) == 3


class _FailingMirror(CteBackend):
    """A backend whose mirror write fails after the relational insert."""

    async def on_link_created(self, conn: Conn, link: links.Link) -> None:
        raise RuntimeError("mirror failed")


async def test_failed_mirror_leaves_neither_side_changed(age_conn: Conn) -> None:
    a, b = await add_memories(age_conn, 2, graph=CteBackend())
    await age_conn.commit()
    with pytest.raises(RuntimeError):
        async with age_conn.transaction():
            await links.create_link(age_conn, graph=_FailingMirror(), src_id=a, dst_id=b,
                                    relation="related_to", observed_by="t")
    assert await _count(age_conn) == 0
    assert await mirror_in_step(age_conn)
