"""The write-behind backlog as capabilities show it (docs/adr/0097): bounded, a full queue
refuses without waiting and reads ``lagging``, the batch being embedded still counts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from attested_cortex.service.workers.embedding import WriteBehind
from attested_cortex.store.memories import Memory


def memory(text: str) -> Memory:
    now = datetime.now(UTC)
    return Memory(uuid.uuid4(), "kb", "", text, (), {}, "dev:a", 1, now, now, None)


def test_a_full_queue_refuses_at_once_and_reads_lagging() -> None:
    behind = WriteBehind(limit=2)
    first, second, third = memory("one"), memory("two"), memory("three")
    assert behind.offer(first) and behind.offer(second)
    assert not behind.offer(third)  # never waits: the backfill will find it
    shown = behind.as_dict()
    assert (shown["queued"], shown["overflowed"], shown["lagging"]) == (2, 1, True)
    assert shown["lag_s"] >= 0
    batch = behind.take(8)
    assert [p.id for p in batch] == [first.id, second.id]
    # being embedded: still queued and held (the backfill leaves it), no longer lagging
    assert behind.holds(first.id) and not behind.holds(third.id)
    shown = behind.as_dict()
    assert (shown["queued"], shown["lagging"], shown["lag_s"]) == (2, False, 0.0)
