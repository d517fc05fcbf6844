"""The outbox events of a write (ADR 0106): the ``post_*`` hook payload of what the write
record covers, appended in the write's transaction right after its record.

Called by :mod:`.write_records` only: every memory, link and transcript write appends its
record there as its last statement before COMMIT (the deep audit names a write without one),
so hooking the outbox to the record is the one place no write path can go around. The payload
is the one a synchronous ``post_*`` hook receives (:mod:`attested_cortex.hooks.payloads`).
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.hooks.payloads import payload
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.pipeline.wire_views import link_view, memory_view
from attested_cortex.store import outbox
from attested_cortex.store.database import Conn
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.outbox import OutboxEvent
from attested_cortex.store.transcripts import Recorded

#: The record event of a write and the hook event its outbox event is named after.
POST_EVENTS: Final = {
    "memory.stored": "post_store", "memory.updated": "post_update",
    "memory.deleted": "post_delete", "link.recorded": "post_link",
    "link.invalidated": "post_invalidate", "transcript.stored": "post_transcript_store",
}


def enabled(svc: Services) -> bool:
    """Whether this server writes the outbox (its schema has it: migration 0041)."""
    return svc.outbox


def memory_event(record: str, memory: Memory) -> OutboxEvent | None:
    """The outbox event of a memory write's record (None for a record that is no event)."""
    name = POST_EVENTS.get(record)
    if name is None:
        return None
    return OutboxEvent(name, f"memory:{memory.id}", memory.namespace,
                       payload(name, **memory_view(memory)))  # type: ignore[arg-type]


def link_event(record: str, link: Link) -> OutboxEvent | None:
    """The outbox event of a link write (links belong to no namespace: every subscription
    to the event receives it)."""
    name = POST_EVENTS.get(record)
    if name is None:
        return None
    return OutboxEvent(name, f"link:{link.id}", None,
                       payload(name, **link_view(link)))  # type: ignore[arg-type]


def transcript_event(row: Recorded, content: str | None) -> OutboxEvent:
    """A stored transcript's event (its text as stored, when the writer hands it over)."""
    t = row.transcript
    fields: dict[str, Any] = {
        "id": str(t.id), "namespace": t.namespace, "content": content or "",
        "metadata": t.metadata, "owner": t.owner, "raw_bytes": t.raw_bytes,
        "stored_bytes": t.stored_bytes, "created_at": t.created_at.isoformat()}
    return OutboxEvent("post_transcript_store", f"transcript:{t.id}", t.namespace,
                       payload("post_transcript_store", **fields))


async def append(svc: Services, conn: Conn, events: list[OutboxEvent | None]) -> None:
    """Append the events (in the caller's transaction) when the server writes the outbox."""
    if enabled(svc):
        await outbox.append(conn, [e for e in events if e is not None])
