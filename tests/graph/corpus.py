"""Builders of test graphs through the real write path (store.links + the AGE mirror hooks).

Callers: tests/graph/conftest.py (the equivalence corpus) and the graph tests (small graphs).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from attested_cortex.errors import ConflictError
from attested_cortex.store import links
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.age_setup import configure_age_connection
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.migrating import migrate
from tests.graph.reference import RefLink

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RELATIONS = ("related_to", "supersedes", "contradicts", "derived_from", "x-cites")


@dataclass
class Corpus:
    """A built graph: its database, memories, links (as reference records) and live set."""

    dsn: str
    memories: list[uuid.UUID]
    links: list[RefLink] = field(default_factory=list)
    tombstoned: set[uuid.UUID] = field(default_factory=set)

    @property
    def live(self) -> set[uuid.UUID]:
        return set(self.memories) - self.tombstoned


def ref(link: links.Link) -> RefLink:
    """The reference record of a stored link."""
    return RefLink(id=link.id, src=link.src_id, dst=link.dst_id, relation=link.relation,
                   valid_from=link.valid_from, valid_until=link.valid_until)


async def add_memories(
    conn: psycopg.AsyncConnection[Any], count: int, *, graph: GraphBackend
) -> list[uuid.UUID]:
    """Insert ``count`` memories and tell the graph backend about each."""
    ids = [uuid.uuid4() for _ in range(count)]
    for memory_id in ids:
        await conn.execute(
            "INSERT INTO memories (id, namespace, author, content) VALUES (%s, 'kg', 'test', 'x')",
            (memory_id,),
        )
        await graph.on_memory_created(conn, memory_id, "kg")
    return ids


async def tombstone(conn: psycopg.AsyncConnection[Any], memory_id: uuid.UUID, *,
                    graph: GraphBackend) -> None:
    """Tombstone a memory the way the memory write path does, mirrored into the graph."""
    await conn.execute(
        "UPDATE memories SET deleted_at = clock_timestamp(), content = '' WHERE id = %s",
        (memory_id,),
    )
    await graph.on_memory_tombstoned(conn, memory_id)


async def link(conn: psycopg.AsyncConnection[Any], graph: GraphBackend, src: uuid.UUID,
               dst: uuid.UUID, relation: str, *, hours: int,
               until_hours: int | None = None) -> links.Link | None:
    """Create a link valid from T0+hours (until T0+until_hours); None if it is a duplicate."""
    until = None if until_hours is None else T0 + timedelta(hours=until_hours)
    try:
        return await links.create_link(
            conn, graph=graph, src_id=src, dst_id=dst, relation=relation, observed_by="test",
            valid_from=T0 + timedelta(hours=hours), valid_until=until,
        )
    except ConflictError:
        return None


async def build_corpus(dsn: str, *, seed: int = 7) -> Corpus:
    """200 memories, >800 links: a ring (cycles), random links, parallel edges, windows,
    invalidations and three tombstoned memories."""
    await migrate(dsn)
    graph = AgeBackend()
    rnd = random.Random(seed)
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await configure_age_connection(conn)
        corpus = Corpus(dsn=dsn, memories=await add_memories(conn, 200, graph=graph))
        made = await _random_links(conn, graph, corpus.memories, rnd)
        made += await _parallel_links(conn, graph, made[:60], rnd)
        for victim in rnd.sample([m for m in made if m.valid_until is None], 90):
            made[made.index(victim)] = await links.invalidate_link(
                conn, graph=graph, link_id=victim.id,
                valid_until=victim.valid_from + timedelta(hours=rnd.randint(1, 200)))
        corpus.links = [ref(m) for m in made]
        for memory_id in corpus.memories[150:153]:
            await tombstone(conn, memory_id, graph=graph)
            corpus.tombstoned.add(memory_id)
        await conn.commit()
    return corpus


async def _random_links(conn: psycopg.AsyncConnection[Any], graph: GraphBackend,
                        ids: list[uuid.UUID], rnd: random.Random) -> list[links.Link]:
    pairs = [(ids[i], ids[(i + 1) % 40]) for i in range(40)]  # a 40-cycle
    pairs += [tuple(rnd.sample(ids, 2)) for _ in range(760)]  # type: ignore[misc]
    made = []
    for src, dst in pairs:
        until = rnd.choice([None, None, None, rnd.randint(300, 900)])
        created = await link(conn, graph, src, dst, rnd.choice(RELATIONS),
                             hours=rnd.randint(0, 240), until_hours=until)
        if created is not None:
            made.append(created)
    return made


async def _parallel_links(conn: psycopg.AsyncConnection[Any], graph: GraphBackend,
                          base: list[links.Link], rnd: random.Random) -> list[links.Link]:
    """Same (src, dst) with other relations, and the same triple in a closed earlier window."""
    made = []
    for original in base:
        other = rnd.choice([r for r in RELATIONS if r != original.relation])
        for relation, hours, until in ((other, 5, None), (original.relation, -100, -50)):
            created = await link(conn, graph, original.src_id, original.dst_id, relation,
                                 hours=hours, until_hours=until)
            if created is not None:
                made.append(created)
    return made
