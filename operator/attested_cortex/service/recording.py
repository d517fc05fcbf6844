"""The audit step of every write: append a write record to the chain, in the write's
transaction. Called by :mod:`.memories` (store, update, delete) and :mod:`.links` (create,
invalidate); keep each call the last statement before the commit (it holds the chain lock).

The record (:mod:`attested_cortex.attest.records`) carries the digests of what was written and
the acting agent; it is signed with that agent's key when the cortex holds it (Cortex
custody), so forging one takes the key, not just the database role. ``cortexctl audit verify
--deep`` rebuilds records from the rows and names every row that no longer matches.
"""

from __future__ import annotations

from attested_cortex.attest import cbor
from attested_cortex.attest.auditing import record_event
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import LinkEvent, MemoryEvent, link_record, memory_record
from attested_cortex.attest.signing import sign
from attested_cortex.service.attesting import snapshot
from attested_cortex.service.context import Caller, Services
from attested_cortex.store.database import Conn
from attested_cortex.store.events import PendingEvent
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory


def signer(svc: Services, caller: Caller) -> AgentKey | None:
    """The acting agent's key when the cortex holds it."""
    return snapshot(svc.keys).signing_keys.get(caller.agent_id)


def pending_memory(svc: Services, caller: Caller, event: MemoryEvent,
                   memory: Memory) -> PendingEvent:
    """The record event of a memory write, to append in the write's own statement."""
    payload = cbor.encode(memory_record(memory))
    key = signer(svc, caller)
    if key is None:
        return PendingEvent(caller.agent_id, event, payload)
    return PendingEvent(caller.agent_id, event, payload, sign(key, payload),
                        key.public.fingerprint)


async def record_memory(svc: Services, conn: Conn, caller: Caller, event: MemoryEvent,
                        memory: Memory) -> None:
    """Append the record of a memory write (update, delete) inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=memory_record(memory), signer=signer(svc, caller))


async def record_link(svc: Services, conn: Conn, caller: Caller, event: LinkEvent,
                      link: Link) -> None:
    """Append the record of a link write (creation, invalidation) inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=link_record(link), signer=signer(svc, caller))
