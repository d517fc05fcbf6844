"""The audit step of every write: append a write record to the chain, in the write's
transaction. Called by :mod:`.memories` (store, update, delete), :mod:`.links` (create,
invalidate), :mod:`.transcripts` (store) and :mod:`.transcript_sweeping` (archive, prune);
keep each call the last statement before the commit (it holds the chain lock).

The record (:mod:`attested_cortex.attest.records`) carries the digests of what was written and
the acting agent; it is signed with that agent's key when the cortex holds it (Cortex
custody), so forging one takes the key, not just the database role. ``cortexctl audit verify
--deep`` rebuilds records from the rows and names every row that no longer matches.
"""

from __future__ import annotations

from attested_cortex.attest import cbor
from attested_cortex.attest.auditing import append_event, record_event
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import (
    LinkEvent,
    MemoryEvent,
    TranscriptEvent,
    link_record,
    memory_record,
    transcript_record,
)
from attested_cortex.attest.signing import sign
from attested_cortex.service.attesting import SignedMemoryPlan, snapshot
from attested_cortex.service.context import Caller, Services
from attested_cortex.store import events, signatures
from attested_cortex.store.database import Conn
from attested_cortex.store.events import PendingEvent
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.signatures import MemorySignature
from attested_cortex.store.transcripts import Recorded

#: The acting agent of the records of transcript sweeps (archive, prune) when the server has
#: no ``audit_signer``: the server itself, on no agent's behalf.
SWEEPER_AGENT = "cortex:transcript-sweeper"


def signer(svc: Services, caller: Caller) -> AgentKey | None:
    """The acting agent's key when the cortex holds it."""
    return snapshot(svc.keys).signing_keys.get(caller.agent_id)


def pending_memory(svc: Services, caller: Caller, event: MemoryEvent, memory: Memory,
                   signature: bytes | None = None) -> PendingEvent:
    """The record event of a memory write, to append in the write's own statement."""
    payload = cbor.encode(memory_record(memory, signature))
    key = signer(svc, caller)
    if key is None:
        return PendingEvent(caller.agent_id, event, payload)
    return PendingEvent(caller.agent_id, event, payload, sign(key, payload),
                        key.public.fingerprint)


async def record_memory(svc: Services, conn: Conn, caller: Caller, event: MemoryEvent,
                        memory: Memory, signature: bytes | None = None) -> None:
    """Append the record of a memory write (update, delete) inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=memory_record(memory, signature), signer=signer(svc, caller))


async def record_signed_memory(conn: Conn, caller: Caller, memory: Memory,
                               plan: SignedMemoryPlan) -> None:
    """Keep an agent's signature of a memory write: its row for ``/verify`` and the signed
    statement in the chain (replays of the same statement are refused there), like a signed
    link."""
    await signatures.insert(conn, MemorySignature(
        memory.id, memory.revision, plan.signature, plan.key.fingerprint, caller.agent_id,
        plan.signed_at, plan.level))
    await append_event(conn, agent_id=caller.agent_id, event_type="memory.signed",
                       payload=plan.payload.encode(), signature=plan.signature,
                       key_fingerprint=plan.key.fingerprint)


async def record_link(svc: Services, conn: Conn, caller: Caller, event: LinkEvent,
                      link: Link) -> None:
    """Append the record of a link write (creation, invalidation) inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=link_record(link), signer=signer(svc, caller))


async def record_transcript(svc: Services, conn: Conn, caller: Caller, event: TranscriptEvent,
                            row: Recorded) -> None:
    """Append the record of a transcript store inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=transcript_record(row), signer=signer(svc, caller))


async def record_sweep(conn: Conn, event: TranscriptEvent, swept: list[Recorded],
                       key: AgentKey | None = None) -> None:
    """Append one record per transcript a sweep archived or pruned, in the sweep's
    transaction, in one pipelined batch; signed by ``key`` (the server's ``audit_signer``)
    when there is one, else unsigned as :data:`SWEEPER_AGENT`."""
    agent_id = key.agent_id if key is not None else SWEEPER_AGENT
    pending = []
    for row in swept:
        payload = cbor.encode(transcript_record(row))
        pending.append(PendingEvent(agent_id, event, payload) if key is None else PendingEvent(
            agent_id, event, payload, sign(key, payload), key.public.fingerprint))
    await events.append_many(conn, pending)
