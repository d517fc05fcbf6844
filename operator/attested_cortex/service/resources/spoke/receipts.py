"""Durable receipts and idempotency of the spoke-memory family (ADR 0060 §5).

Every mutating op runs :func:`mutate`: one transaction whose first statement inserts the
receipt (keyed on (space, principal, op, idempotency key) when the request has a key), then
the op's effect, then the receipt's outcome, then the op's signed record in the audit chain
(:mod:`.audit`, ADR 0067) and its ``post_spoke_write`` outbox event (:mod:`.events`).
A refusal rolls everything back, the receipt
too, so a refused request leaves its key free. A request whose key a committed request took
is answered that request's receipt when its payload (the canonical SHA-256 of op and
request) is the same, and refused ``idempotency_key_reused`` otherwise; one whose key a
request still in flight holds waits for it on the unique index (lock_timeout). So twenty
concurrent identical requests make one effect and twenty identical receipts, and a retry
after a lost answer, a restart or a failover finds the receipt instead of writing again.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from attested_cortex.errors import ConflictError
from attested_cortex.service.pipeline import settling
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources.idempotency import digest
from attested_cortex.service.resources.spoke import audit as spoke_audit
from attested_cortex.service.resources.spoke import events as spoke_events
from attested_cortex.service.resources.spoke.views import receipt_view
from attested_cortex.service.workers import embedding
from attested_cortex.spoke.models import MemoryReceipt
from attested_cortex.store import usage
from attested_cortex.store.database import Conn
from attested_cortex.store.memories import Memory
from attested_cortex.store.spoke import memory as rows


@dataclass(frozen=True)
class Effect:
    """What a mutating op did: the ids it touched and the revision it reached; ``written``:
    the record memories it wrote, offered to the embedder once the transaction commits (so
    recall's vector half sees them as it sees native writes)."""

    refs: Sequence[str] = ()
    revision: int | None = None
    status: str = "committed"
    written: Sequence[Memory] = ()


#: The op's effect, in the receipt's transaction (given the connection and the receipt's id).
EffectFn = Callable[[Conn, uuid.UUID], Awaitable[Effect]]


async def mutate(svc: Services, caller: Caller, *, op: str, space_id: str,
                 request: dict[str, Any], key: str | None, effect: EffectFn) -> MemoryReceipt:
    """Run ``effect`` once per (space, principal, op, key) and answer its receipt."""
    sha = digest(op, request)
    for _ in range(2):  # a concurrent request with the key committed first: answer as it
        if key is not None:
            kept = await _kept(svc, caller, op=op, space_id=space_id, key=key, sha=sha)
            if kept is not None:
                return kept
        try:
            return await _once(svc, caller, op=op, space_id=space_id, key=key, sha=sha,
                               effect=effect, request=request)
        except ConflictError as exc:
            if exc.code != rows.RECEIPT_TAKEN:
                raise
    raise ConflictError("a request with this idempotency key is still in flight; retry",
                        code="idempotency_key_in_use")


async def _kept(svc: Services, caller: Caller, *, op: str, space_id: str, key: str,
                sha: bytes) -> MemoryReceipt | None:
    async with svc.db.connection() as conn:
        row = await rows.keyed_receipt(conn, space_id=space_id, principal=caller.agent_id,
                                       op=op, key=key)
    if row is None:
        return None
    if bytes(row["request_sha256"]) != sha:
        raise ConflictError(
            "this idempotency key was used for a different request of this op in this space; "
            "use a new key for a new request", code="idempotency_key_reused",
            receipt_id=str(row["receipt_id"]))
    return receipt_view(row)


async def _once(svc: Services, caller: Caller, *, op: str, space_id: str, key: str | None,
                sha: bytes, effect: EffectFn, request: dict[str, Any]) -> MemoryReceipt:
    receipt_id = uuid.uuid4()
    async with svc.db.transaction() as conn:
        await rows.take_receipt(conn, {
            "receipt_id": receipt_id, "space_id": space_id, "principal": caller.agent_id,
            "op": op, "idempotency_key": key, "request_sha256": sha, "status": "pending"})
        before = (await usage.stored(conn, agent=caller.agent_id)).total
        done = await effect(conn, receipt_id)
        await _within_cap(svc, conn, caller, before)
        row = await rows.settle_receipt(conn, receipt_id, status=done.status,
                                        refs=done.refs, revision=done.revision)
        await spoke_audit.record_op(svc, conn, caller, row)  # it takes the chain lock
        receipt = receipt_view(row)
        await spoke_events.append_write(svc, conn, op=op, space_id=space_id,  # ADR 0130
                                        principal=caller.agent_id, request=request,
                                        receipt=receipt)
    for memory in done.written:
        await embedding.after_write(svc.vectors, svc.db, memory, None)
    return receipt


async def _within_cap(svc: Services, conn: Conn, caller: Caller, before: int) -> None:
    """Refuse (413, rolling the op back) an op that grew its principal's stored bytes past
    the cap: every spoke byte counts (migration 0032's triggers updated the usage row in
    this transaction), whatever the op wrote: profiles, candidates, reflections, staged
    chunks, exports, records. An op that stores nothing new, or frees bytes, always runs."""
    after = (await usage.stored(conn, agent=caller.agent_id)).total
    limit = svc.policy.storage_limit(caller.agent_id)
    if after > before and after > limit:
        raise settling.over_cap(settling.Cap(caller.agent_id, limit), used=before,
                                adds=after - before)
