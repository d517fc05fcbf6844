"""Inbound federation: a peer's batch of changes, each checked, then stored through the
pipeline or quarantined; the per-change answers are the ACKs (docs/federation.md). Called by
the ``/v1/federation`` routes and the ``federation_quarantine`` MCP tool.

Each change, in the sender's order (ADR 0121):

1. past ``expires_at``: ``expired`` (dropped; the sender sends a fresh copy);
2. correlation id in the replay cache, or ``seq`` at or below the peer's durable high-water
   mark: ``duplicate`` (a replay, or a retry of what was already handled);
3. ``origin`` is this cortex: ``own`` (a loop: acknowledged, never imported);
4. namespace not in the peer's ``accept`` (a link: either end not held here): ``refused``;
5. signature checked against the peer's published keyring (ADR 0122): unsigned or failing
   -> ``quarantined`` (kept apart, never recalled);
6. (revision, origin) not above what the object holds, or the object was deleted:
   ``superseded`` (ADR 0123); what it holds is also a memory homed here, or an edit an
   agent made here of an imported one (ADR 0141: peers edit each other's memories);
7. stored, updated or deleted through the pipeline as agent ``peer:<name>`` (scopes, trust
   tier, rules, hooks with ``origin``, quotas, audit), keyed by the correlation id so a retry
   after a crash writes once; then the object's provenance and the mark, in one transaction.

A refusal that may pass later (a quota, a busy database) answers ``retry`` and stops the
batch there, so the mark never passes a change that was not handled.
"""

from __future__ import annotations

import dataclasses
import uuid
from functools import partial
from typing import Any

from attested_cortex.attest.payloads import from_unix_ms
from attested_cortex.attest.peer_changes import (
    SignedChange,
    Verified,
    check_change,
    check_origin,
    keyring_document,
)
from attested_cortex.errors import ConflictError, CortexError, InvalidInputError, NotFoundError
from attested_cortex.service.pipeline import attesting
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import Call, Target, run
from attested_cortex.service.resources import idempotency, links, memories
from attested_cortex.service.resources.commands import StoreMemory, UpdateMemory
from attested_cortex.service.resources.federation_calls import (
    FederatedDelete,
    FederatedLinkCreate,
    FederatedLinkInvalidate,
    FederatedStore,
    FederatedUpdate,
)
from attested_cortex.service.resources.federation_state import Federation, Peer
from attested_cortex.service.resources.federation_wire import (
    BatchResult,
    ChangeBatch,
    ChangeResult,
    FederatedChange,
    Status,
)
from attested_cortex.service.resources.graph_commands import CreateLink, InvalidateLink
from attested_cortex.store import federation as rows
from attested_cortex.store import federation_sending as sending_rows
from attested_cortex.store import memories as memory_rows
from attested_cortex.store.database import Conn
from attested_cortex.store.federation import FederatedObject
from attested_cortex.store.memories import Memory

#: Refusals a later attempt may pass: the sender retries them.
TRANSIENT = frozenset({408, 429, 500, 503})


def _result(change: FederatedChange, status: Status, *, accepted: bool = True,
            **fields: Any) -> ChangeResult:
    return ChangeResult(correlation_id=change.correlation_id, seq=change.seq,
                        accepted=accepted, status=status, **fields)


async def receive(svc: Services, fed: Federation, peer: Peer,
                  batch: ChangeBatch) -> BatchResult:
    """Handle ``batch`` from ``peer`` (already authenticated by its client certificate)."""
    if len(batch.changes) > fed.max_changes:
        raise InvalidInputError(f"at most {fed.max_changes} changes per batch",
                                field="changes")
    results: list[ChangeResult] = []
    for index, change in enumerate(batch.changes):
        result = await _one(svc, fed, peer, change)
        results.append(result)
        if result.status == "retry":
            results.extend(_result(c, "retry", accepted=False, reason="not_reached")
                           for c in batch.changes[index + 1:])
            break
    return BatchResult(cortex=fed.cortex_id, results=results)


async def _one(svc: Services, fed: Federation, peer: Peer,
               change: FederatedChange) -> ChangeResult:
    now = fed.clock()
    if change.expires_at < now * 1000:
        return _result(change, "expired", accepted=False, reason="expired")
    if fed.replay.seen(change.correlation_id, now):
        return _result(change, "duplicate", reason="duplicate")
    async with svc.db.connection() as conn:
        if change.seq <= await rows.high_water(conn, peer.name):
            fed.replay.add(change.correlation_id, now)
            return _result(change, "duplicate", reason="duplicate")
    fed.replay.add(change.correlation_id, now)
    try:
        return await _handle(svc, fed, peer, change)
    except CortexError as exc:
        if exc.http_status in TRANSIENT or (isinstance(exc, ConflictError)
                                            and exc.code == idempotency.IN_USE):
            fed.replay.forget(change.correlation_id)
            return _result(change, "retry", accepted=False, reason=exc.code)
        await _advance(svc, peer, change)
        return _result(change, "refused", reason=exc.code)


async def _advance(svc: Services, peer: Peer, change: FederatedChange) -> None:
    async with svc.db.transaction() as conn:
        await rows.advance(conn, peer.name, change.seq)


def _local(change: FederatedChange, local_id: uuid.UUID) -> dict[str, Any]:
    """The local object in the answer: ``link_id`` for a link, else ``memory_id``."""
    return {"link_id" if change.kind.startswith("link.") else "memory_id": str(local_id)}


def _signed(change: FederatedChange) -> SignedChange:
    memory, link = change.memory, change.link
    return SignedChange(kind=change.kind, home=change.home, object_id=str(change.object_id),
                        author=change.author, signed_at=change.signed_at,
                        namespace=memory.namespace if memory else "",
                        title=memory.title if memory else "",
                        content=memory.content if memory else "",
                        src_id=str(link.src_id) if link else "",
                        dst_id=str(link.dst_id) if link else "",
                        relation=link.relation if link else "",
                        valid_from=link.valid_from if link else 0,
                        valid_until=link.valid_until if link else None,
                        origin=change.origin, revision=change.revision)


async def _verify(fed: Federation, peer: Peer, change: FederatedChange) -> Verified | str:
    """The key that verifies the change, from the keyring of its origin when the origin is
    a configured peer (a change relayed by another peer), else the sender's; a key the
    cached keyring does not know (or one that fails: the peer may have rotated) fetches the
    keyring again once. Unsigned needs no keyring (so a peer's outage cannot hold it)."""
    if change.signature is None:
        return "unsigned"
    if change.signer == "origin":
        return check_origin(_signed(change), change.signature,
                            {name: p.public_key for name, p in fed.peers.items()})
    publisher = fed.peers.get(change.origin, peer)
    outcome = check_change(_signed(change), change.signature,
                           await fed.keyrings.get(publisher))
    if outcome in ("unknown_key", "bad_signature"):
        outcome = check_change(_signed(change), change.signature,
                               await fed.keyrings.get(publisher, fresh=True))
    return outcome


async def _handle(svc: Services, fed: Federation, peer: Peer,
                  change: FederatedChange) -> ChangeResult:
    if change.origin == fed.cortex_id:
        await _advance(svc, peer, change)
        return _result(change, "own", reason="own_change")
    refusal, ends = await _refusal(svc, peer, change)
    if refusal is not None:
        await _advance(svc, peer, change)
        return _result(change, "refused", reason=refusal)
    verified = await _verify(fed, peer, change)
    if not isinstance(verified, Verified):
        return await _quarantine(svc, peer, change, verified)
    async with svc.db.connection() as conn:
        held = await _held(conn, fed, change)
    if held is not None and (held.deleted or (change.revision, change.origin)
                             <= (held.applied_revision, held.applied_origin)):
        await _advance(svc, peer, change)
        return _result(change, "superseded", reason="superseded",
                       **_local(change, held.local_id))
    if held is not None and not held.peer:  # homed here, first edited by a peer: its row
        # goes in before the write, so the sender never reads the write as one made here
        async with svc.db.transaction() as conn:
            await rows.applied(conn, dataclasses.replace(held, peer=peer.name),
                               signature="", correlation_id=change.correlation_id)
    origin = {"cortex": change.origin, "revision": change.revision, "home": change.home,
              "object_id": str(change.object_id), "author": change.author, "peer": peer.name}
    caller = dataclasses.replace(peer.caller,
                                 idempotency_key=f"federation:{change.correlation_id}")
    if change.kind.startswith("link."):
        status, local_id = await _write_link(svc, caller, change, held, ends, origin)
    else:
        status, local_id = await _write(svc, peer, caller, change, held, origin)
    obj = FederatedObject(home=change.home, object_id=change.object_id, local_id=local_id,
                          applied_revision=change.revision, applied_origin=change.origin,
                          deleted=change.kind in ("memory.delete", "link.invalidate"),
                          peer=peer.name,
                          signed_by=verified.key.agent_id,
                          key_fingerprint=verified.key.fingerprint)
    async with svc.db.transaction() as conn:
        await rows.applied(conn, obj, signature=change.signature or "",
                           correlation_id=change.correlation_id)
        await rows.advance(conn, peer.name, change.seq)
    return _result(change, status, **_local(change, local_id), provenance={
        "attest_level": "peer_attested", "origin": change.origin,
        "signed_by": verified.key.agent_id,
        "key_fingerprint": verified.key.fingerprint, "peer": peer.name})


async def _held(conn: Conn, fed: Federation,
                change: FederatedChange) -> FederatedObject | None:
    """What this cortex holds of the changed object, with the (revision, origin) the
    conflict rule compares (ADR 0123, ADR 0141): a memory homed here that no peer edited
    yet stands at (its revision, this cortex); a memory whose state is an edit an agent
    made here stands at that edit's wire revision (:func:`sending_rows.edit_revision`, the
    same the sender gave it) and this cortex, so a peer's change at or below it loses
    everywhere and every cortex keeps the same winner."""
    held = await rows.find(conn, change.home, change.object_id)
    if change.kind.startswith("link."):
        return held
    here = change.home == fed.cortex_id
    local = held.local_id if held is not None else change.object_id if here else None
    state = None if local is None else await rows.standing(conn, local)
    if state is None or local is None:
        if here:
            raise NotFoundError("no such memory is homed here", code="unknown_object")
        return held
    if held is None:
        return FederatedObject(home=change.home, object_id=change.object_id, local_id=local,
                               applied_revision=state.revision,
                               applied_origin=fed.cortex_id, deleted=state.deleted, peer="",
                               signed_by="", key_fingerprint="")
    if state.edited and not held.deleted:
        revision = sending_rows.edit_revision(state.revision, sending_rows.Held(
            held.home, held.object_id, held.applied_revision))
        return dataclasses.replace(held, applied_revision=revision,
                                   applied_origin=fed.cortex_id, deleted=state.deleted)
    return held


async def _refusal(svc: Services, peer: Peer, change: FederatedChange,
                   ) -> tuple[str | None, tuple[uuid.UUID, uuid.UUID] | None]:
    """Why the change is refused before its signature is even checked (None: it is not),
    and a link's two ends here."""
    if change.kind == "memory.store" and change.home != change.origin:
        return "not_origin_object", None  # a peer edits others' memories, never stores them
    if change.kind in ("memory.store", "memory.update"):
        accepted = change.memory is not None and peer.accepts(change.memory.namespace)
        return (None if accepted else "namespace_not_accepted"), None
    if change.kind == "link.create":
        link = change.link
        if link is None:
            return "link_missing", None
        async with svc.db.connection() as conn:
            src = await rows.find(conn, link.src_home, link.src_id)
            dst = await rows.find(conn, link.dst_home, link.dst_id)
        if src is None or dst is None or src.deleted or dst.deleted:
            return "link_end_not_here", None  # never accepted here, or deleted
        return None, (src.local_id, dst.local_id)
    return None, None


async def _write_link(svc: Services, caller: Caller, change: FederatedChange,
                      held: FederatedObject | None, ends: tuple[uuid.UUID, uuid.UUID] | None,
                      origin: dict[str, Any]) -> tuple[Status, uuid.UUID]:
    """The pipeline write of a verified link change: (status, local link id)."""
    link = change.link
    until = None if link is None or link.valid_until is None else from_unix_ms(
        link.valid_until)
    if change.kind == "link.invalidate":
        if held is None:
            raise NotFoundError("the link is not here", code="unknown_link")
        cmd = InvalidateLink(link_id=held.local_id, valid_until=until)
        await _once_link(svc, caller, FederatedLinkInvalidate(cmd, origin=origin),
                         "link.invalidate", cmd.model_dump(mode="json"), held.local_id)
        return "invalidated", held.local_id
    assert link is not None and ends is not None
    create = CreateLink(src_id=ends[0], dst_id=ends[1], relation=link.relation,
                        valid_from=from_unix_ms(link.valid_from), valid_until=until)
    view = await _once_link(svc, caller, FederatedLinkCreate(create, origin=origin),
                            "link.create", create.model_dump(mode="json"), None)
    return "linked", uuid.UUID(view["id"])


async def _once_link(svc: Services, caller: Caller, call: Call[Any], operation: str,
                     request: dict[str, Any], resource_id: uuid.UUID | None) -> dict[str, Any]:
    written = await idempotency.once(svc, caller, partial(run, svc, call=call),
                                     operation=operation, request=request, answer=links.LINK,
                                     status=201, resource_id=resource_id)
    return written.answer


async def _write(svc: Services, peer: Peer, caller: Caller, change: FederatedChange,
                 held: FederatedObject | None,
                 origin: dict[str, Any]) -> tuple[Status, uuid.UUID]:
    """The pipeline write of one verified change: (status, local memory id)."""
    memory = change.memory
    if change.kind == "memory.delete":
        if held is None:  # nothing here to delete: remember the tombstone only
            return "deleted", uuid.uuid5(uuid.NAMESPACE_URL, f"{change.home}/{change.object_id}")
        local = held.local_id
        await _once(svc, caller, FederatedDelete(local, origin=origin), "memory.delete",
                    {"id": str(local)}, local)
        return "deleted", local
    assert memory is not None
    fields = {"title": memory.title, "content": memory.content, "tags": list(memory.tags),
              "metadata": dict(memory.metadata)}
    if held is None:
        cmd = StoreMemory(namespace=peer.local(memory.namespace), **fields)
        view = await _once(svc, caller, FederatedStore(cmd, origin=origin), "memory.store",
                           cmd.model_dump(mode="json"), None)
        return "stored", uuid.UUID(view["id"])
    update = UpdateMemory(**fields)
    await _once(svc, caller, FederatedUpdate(held.local_id, update, origin=origin),
                "memory.update", update.model_dump(mode="json"), held.local_id)
    return "updated", held.local_id


async def _once(svc: Services, caller: Caller, call: Call[Any], operation: str,
                request: dict[str, Any], resource_id: uuid.UUID | None) -> dict[str, Any]:
    written = await idempotency.once(svc, caller, partial(run, svc, call=call),
                                     operation=operation, request=request,
                                     answer=memories.MEMORY, status=201,
                                     resource_id=resource_id)
    return written.answer


async def _quarantine(svc: Services, peer: Peer, change: FederatedChange,
                      reason: str) -> ChangeResult:
    async with svc.db.transaction() as conn:
        held = await rows.quarantine(
            conn, peer=peer.name, correlation_id=change.correlation_id, origin=change.origin,
            kind=change.kind, object_id=change.object_id, revision=change.revision,
            reason=reason, change=change.model_dump(mode="json"))
        await rows.advance(conn, peer.name, change.seq)
    return _result(change, "quarantined", reason=reason, quarantine_id=held)


@dataclasses.dataclass
class QuarantineCall(Call[list[dict[str, Any]]]):
    """``GET /v1/federation/quarantine``: the held changes (``audit.read``)."""

    spec = ops.FEDERATION_QUARANTINE
    after: int = 0
    limit: int = 100

    async def execute(self, svc: Services, caller: Caller) -> list[dict[str, Any]]:
        async with svc.db.connection() as conn:
            held = await rows.quarantined(conn, after=self.after, limit=self.limit)
        return [{"id": q.id, "peer": q.peer, "correlation_id": str(q.correlation_id),
                 "origin": q.origin, "kind": q.kind, "object_id": str(q.object_id),
                 "revision": q.revision, "reason": q.reason, "change": q.change,
                 "received_at": q.received_at.isoformat()} for q in held]


async def quarantine(svc: Services, caller: Caller, *, after: int = 0,
                     limit: int = 100) -> dict[str, Any]:
    """The quarantine, oldest first, from id ``after``; ``next`` for the following page."""
    items = await run(svc, caller, QuarantineCall(after, limit))
    return {"items": items, "next": items[-1]["id"] if len(items) == limit else None}


def published_keyring(svc: Services, fed: Federation) -> dict[str, Any]:
    """The keyring peers verify this cortex's agents' changes with, signed by its identity
    (every agent key the server trusts, with its rotation windows)."""
    return keyring_document(fed.identity, attesting.snapshot(svc.keys).keyring,
                            issued_at=int(fed.clock() * 1000))


@dataclasses.dataclass
class ProvenanceCall(Call[dict[str, Any]]):
    """``GET /v1/memories/{id}/provenance``: whether a memory came from a peer, and whose
    signature it was stored on (``memory.read`` on its namespace)."""

    spec = ops.MEMORY_PROVENANCE
    memory_id: uuid.UUID
    found: Memory | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        async with svc.db.connection() as conn:
            self.found = await memory_rows.get(conn, self.memory_id)
        return Target((self.found.namespace,), self.found.author)

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        async with svc.db.connection() as conn:
            held = await rows.provenance(conn, self.memory_id)
        if held is None:
            return {"memory_id": str(self.memory_id), "federated": False}
        return {"memory_id": str(self.memory_id), "federated": True,
                "attest_level": "peer_attested", "origin": held.applied_origin,
                "revision": held.applied_revision, "home": held.home,
                "object_id": str(held.object_id), "signed_by": held.signed_by,
                "key_fingerprint": held.key_fingerprint, "peer": held.peer,
                "deleted": held.deleted}


async def provenance(svc: Services, caller: Caller, memory_id: uuid.UUID) -> dict[str, Any]:
    """Where a memory came from (a federated memory's peer_attested provenance)."""
    return await run(svc, caller, ProvenanceCall(memory_id))
