"""The write-behind queue (service/workers/embedding.py, docs/adr/0014): one entry per memory, its
newest revision; bounded; a full queue refuses without losing the write (the backfill covers
it)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from attested_cortex.service.workers.embedding import WriteBehind
from attested_cortex.store.memories import Memory

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def memory(content: str, revision: int = 1, memory_id: uuid.UUID | None = None) -> Memory:
    return Memory(id=memory_id or uuid.uuid4(), namespace="kb", title="t", content=content,
                  tags=(), metadata={}, author="a", revision=revision, created_at=NOW,
                  updated_at=NOW, deleted_at=None)


def test_an_updated_memory_is_queued_once_at_its_newest_revision() -> None:
    behind = WriteBehind(limit=10)
    first = memory("old words")
    assert behind.offer(first)
    assert behind.offer(replace(first, content="new words", revision=2))
    assert behind.queued == 1
    (pending,) = behind.take(5)
    assert pending.id == first.id and pending.revision == 2 and pending.text == "t\nnew words"
    assert behind.queued == 1  # in flight until the batch is stored
    behind.in_flight = 0
    assert behind.queued == 0


def test_a_full_queue_refuses_new_memories_but_takes_newer_revisions() -> None:
    behind = WriteBehind(limit=2)
    kept = [memory("a"), memory("b")]
    assert all(behind.offer(m) for m in kept)
    assert not behind.offer(memory("c"))
    assert behind.overflowed == 1
    assert behind.offer(replace(kept[0], revision=2))  # already queued: no new room needed
    assert [p.revision for p in behind.take(10)] == [2, 1]
    assert behind.as_dict() == {"queued": 2, "embedded": 0, "overflowed": 1, "failed": 0,
                                "limit": 2}


def test_batches_take_the_oldest_first() -> None:
    behind = WriteBehind(limit=100)
    made = [memory(str(i)) for i in range(5)]
    for m in made:
        behind.offer(m)
    assert [p.id for p in behind.take(3)] == [m.id for m in made[:3]]
    behind.in_flight = 0
    assert [p.id for p in behind.take(3)] == [m.id for m in made[3:]]
