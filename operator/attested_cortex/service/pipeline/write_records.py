"""The audit step of every write: append a write record to the chain, in the write's
transaction. Called by :mod:`..resources.memories` (store, update, delete),
:mod:`..resources.links` (create, invalidate), :mod:`..resources.transcripts` (store) and
:mod:`..workers.transcript_sweeping` (archive, prune); keep each call the last statement before
the commit (it holds the chain lock).

The record (:mod:`attested_cortex.attest.records`) carries the digests of what was written and
the acting agent; it is signed with that agent's key when the cortex holds it (Cortex
custody), so forging one takes the key, not just the database role. ``cortexctl audit verify
--deep`` rebuilds records from the rows and names every row that no longer matches.

A writer that builds its record from a row it did not just write (the transcript sweeper
builds ``transcript.archived`` from the stored row) first checks that row against the chain
(:func:`split_recorded`), and so does every write that changes an existing memory or link
(:func:`require_recorded_memory`, :func:`require_recorded_link`): extending a row changed
behind the server would sign the change into the chain and launder it, so such a row is
refused (409 ``changed_behind_the_server``) and reported instead. On a server holding the
master key only a record the key vouches for counts (:func:`attested_cortex.store.events.
recorded_statements`): a matching record forged with the database role alone is no record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from attested_cortex.attest import cbor
from attested_cortex.attest.auditing import append_event, record_event
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import (
    LINK_EVENTS,
    MEMORY_EVENTS,
    LinkEvent,
    MemoryEvent,
    TranscriptEvent,
    link_record,
    memory_record,
    sha256,
    transcript_record,
)
from attested_cortex.attest.signing import sign
from attested_cortex.errors import ConflictError
from attested_cortex.service.pipeline import outboxing
from attested_cortex.service.pipeline.attesting import SignedMemoryPlan, snapshot
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.store import events, signatures
from attested_cortex.store.database import Conn
from attested_cortex.store.events import PendingEvent
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.signatures import MemorySignature
from attested_cortex.store.transcripts import Recorded
from attested_cortex.store.written import WrittenBy

log = logging.getLogger(__name__)

#: The acting agent of the records of transcript sweeps (archive, prune) when the server has
#: no ``audit_signer``: the server itself, on no agent's behalf.
SWEEPER_AGENT = "cortex:transcript-sweeper"


def written_by(caller: Caller) -> WrittenBy:
    """The tier and effective scopes of ``caller``'s request, as its write's row and record
    keep them (ADR 0066): the scopes the request ran with (held ∩ the tier's ceiling,
    computed once at authentication), sorted; and its Allow summary (ADR 0124)."""
    return WrittenBy(caller.tier, tuple(sorted(str(s) for s in caller.scopes.scopes)),
                     caller.allowed)


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
    await outboxing.append(svc, conn, [outboxing.memory_event(event, memory)])


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


async def record_stored(svc: Services, conn: Conn, caller: Caller,
                        written: Sequence[tuple[Memory, SignedMemoryPlan | None]]) -> None:
    """Append the records of a batch of stores inside its transaction, in one statement:
    each memory its own ``memory.stored`` event, followed by its ``memory.signed``
    statement (and its signature row) when the agent signed it, as a store of each one by
    one would have."""
    key, pending = signer(svc, caller), []
    for memory, plan in written:
        payload = cbor.encode(memory_record(memory, plan.signature if plan else None))
        pending.append(PendingEvent(caller.agent_id, "memory.stored", payload) if key is None
                       else PendingEvent(caller.agent_id, "memory.stored", payload,
                                         sign(key, payload), key.public.fingerprint))
        if plan is not None:
            await signatures.insert(conn, MemorySignature(
                memory.id, memory.revision, plan.signature, plan.key.fingerprint,
                caller.agent_id, plan.signed_at, plan.level))
            pending.append(PendingEvent(caller.agent_id, "memory.signed", plan.payload.encode(),
                                        plan.signature, plan.key.fingerprint))
    await events.append_rows(conn, pending)
    await outboxing.append(svc, conn, [outboxing.memory_event("memory.stored", memory)
                                       for memory, _ in written])


async def record_link(svc: Services, conn: Conn, caller: Caller, event: LinkEvent,
                      link: Link) -> None:
    """Append the record of a link write (creation, invalidation) inside its transaction."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=link_record(link), signer=signer(svc, caller))
    await outboxing.append(svc, conn, [outboxing.link_event(event, link)])


async def record_transcript(svc: Services, conn: Conn, caller: Caller, event: TranscriptEvent,
                            row: Recorded, content: str | None = None) -> None:
    """Append the record of a transcript store inside its transaction, and its outbox
    event (with ``content``, the text as stored)."""
    await record_event(conn, agent_id=caller.agent_id, event_type=event,
                       payload=transcript_record(row), signer=signer(svc, caller))
    if event == "transcript.stored":
        await outboxing.append(svc, conn, [outboxing.transcript_event(row, content)])


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


async def split_recorded(conn: Conn, previous: tuple[TranscriptEvent, ...],
                         rows: list[Recorded]) -> tuple[list[Recorded], list[Recorded]]:
    """``rows`` split into those whose record, rebuilt from the row as it is, the chain
    holds as one of the ``previous`` events (unchanged since it was written), and the rest
    (changed behind the server). A transcript moves one way (stored, archived, pruned), so a
    row matching any of its records matches its latest one."""
    if not rows:
        return [], []
    digests = {r.transcript.id: sha256(cbor.encode(transcript_record(r))) for r in rows}
    held = await events.recorded_statements(conn, event_types=previous,
                                            payload_hashes=list(digests.values()))
    unchanged = [r for r in rows if digests[r.transcript.id] in held]
    return unchanged, [r for r in rows if digests[r.transcript.id] not in held]


async def split_recorded_memories(conn: Conn, memories: Sequence[Memory]
                                  ) -> tuple[list[Memory], list[Memory]]:
    """``memories`` split into those matching one of their records as they are, and the
    rest (changed behind the server: re-sealing them would launder the change)."""
    if not memories:
        return [], []
    signed = await signatures.of_revisions(conn, [(m.id, m.revision) for m in memories])
    digests = {m.id: sha256(cbor.encode(memory_record(m, signed.get(m.id))))
               for m in memories}
    held = await events.recorded_statements(conn, event_types=MEMORY_EVENTS,
                                            payload_hashes=list(digests.values()))
    return ([m for m in memories if digests[m.id] in held],
            [m for m in memories if digests[m.id] not in held])


async def record_resealed(conn: Conn, memories: Sequence[Memory],
                          key: AgentKey | None = None) -> None:
    """Append a ``memory.resealed`` record per memory the re-sealing worker moved (its
    sealed value and key version changed), in its transaction, in one pipelined batch;
    signed by ``key`` (the ``audit_signer``'s) when there is one."""
    signed = await signatures.of_revisions(conn, [(m.id, m.revision) for m in memories])
    agent_id = key.agent_id if key is not None else SWEEPER_AGENT
    pending = []
    for memory in memories:
        payload = cbor.encode(memory_record(memory, signed.get(memory.id)))
        pending.append(PendingEvent(agent_id, "memory.resealed", payload) if key is None
                       else PendingEvent(agent_id, "memory.resealed", payload,
                                         sign(key, payload), key.public.fingerprint))
    await events.append_many(conn, pending)


async def require_recorded_memory(conn: Conn, memory: Memory) -> None:
    """409 unless ``memory`` (read in the write's transaction, before the write) still
    matches one of its records: an update or a delete would extend a change made behind the
    server into the chain. A memory record names its revision, so matching any is matching
    the one of this revision."""
    signed = await signatures.for_revision(conn, memory.id, memory.revision)
    record = memory_record(memory, signed.signature if signed is not None else None)
    await _require(conn, "memory", str(memory.id), sha256(cbor.encode(record)), MEMORY_EVENTS)


async def require_recorded_link(conn: Conn, link: Link) -> None:
    """409 unless ``link`` still matches one of its records (before an invalidation)."""
    await _require(conn, "link", str(link.id), sha256(cbor.encode(link_record(link))),
                   LINK_EVENTS)


async def _require(conn: Conn, kind: str, key: str, digest: bytes,
                   previous: tuple[str, ...]) -> None:
    if await events.recorded_statements(conn, event_types=previous, payload_hashes=[digest]):
        return
    log.warning("row changed behind the server: write refused, record not extended",
                extra={"kind": kind, "id": key})
    raise ConflictError(
        f"{kind} {key} no longer matches its audit record (it was changed behind the "
        "server, or written before records existed): it is not written to until an "
        "operator has looked; `cortexctl audit verify --deep` names it",
        code="changed_behind_the_server", **{f"{kind}_id": key})
