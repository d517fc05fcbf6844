"""Batch stores: ``POST /v1/memories:batch`` and the ``memory_store_batch`` tool. Called by
the HTTP route and the MCP tool.

A batch is one :class:`~..pipeline.calls.Call` (``memory.store_batch``) run by the pipeline
like any write, with each memory going through what a store of it alone would: its sizes and
vector checked, its ``pre_store``/``pre_index`` hooks fired in turn (a Modify re-validated as
a client's request; a Deny of any memory refuses the batch, naming its ``index``), its own
write record in the chain and its post- hooks after the commit. What is done once for the
batch: the scope and rules over every namespace it writes, the storage quota for its total
(early, and exactly on the locked usage row in the transaction), the approval gate and the
Idempotency-Key. All or nothing: one transaction, in the lock order of every write (ADR 0017:
the key and the approval, the rows and the author's usage row, the chain lock last), so a
failure at any memory writes none. Design and figures: docs/adr/0044-batch-writes.md.

Ids: a keyed batch (ADR 0030) writes its first memory under the key's chosen id and each
later one under an id derived from it (:func:`batch_ids`), so a retry whose answer was lost
reads the batch back (:data:`MEMORIES`, the answer kind of a keyed batch).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attested_cortex.errors import CortexError
from attested_cortex.hooks.events import EventName
from attested_cortex.service.pipeline import attesting, settling, write_records
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.calls import Call, Target
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import run
from attested_cortex.service.resources import transcripts
from attested_cortex.service.resources.commands import MAX_BATCH, StoreMemories
from attested_cortex.service.resources.idempotency import AnswerKind
from attested_cortex.service.resources.memories import StoreCall
from attested_cortex.service.resources.views import memory_view
from attested_cortex.service.workers import embedding
from attested_cortex.store import memories as rows
from attested_cortex.store.memories import Memory, NewMemory


def batch_ids(first: uuid.UUID, count: int) -> list[uuid.UUID]:
    """The ids of a batch of ``count`` memories whose first is ``first``: the rest derived
    from it (a keyed batch's lost answer is read back from them)."""
    return [first, *(uuid.uuid5(first, str(index)) for index in range(1, count))]


def _at(index: int, exc: CortexError) -> CortexError:
    """``exc`` naming the batch item it is about."""
    exc.details.setdefault("index", index)
    if not exc.message.startswith("memories["):
        exc.message = f"memories[{index}]: {exc.message}"
        exc.args = (exc.message,)
    return exc


@dataclass
class BatchStoreCall(Call[list[Memory]]):
    """``POST /v1/memories:batch``: each memory a :class:`StoreCall` for its checks, hook
    payloads and Modify; written together."""

    spec = ops.MEMORY_STORE_BATCH
    settles = True
    batched = True
    cmd: StoreMemories
    items: list[StoreCall] = field(init=False)

    def __post_init__(self) -> None:
        self.items = [StoreCall(memory) for memory in self.cmd.memories]

    async def target(self, svc: Services, caller: Caller) -> Target:
        adds = 0
        for index, item in enumerate(self.items):
            try:  # sizes and the client's vector: no I/O
                adds += (await item.target(svc, caller)).adds_bytes
            except CortexError as exc:
                raise _at(index, exc) from None
        namespaces = tuple(sorted({item.cmd.namespace for item in self.items}))
        return Target(namespaces, caller.agent_id, adds)

    def hooked(self, target: Target) -> Sequence[tuple[Call[Any], str | None]]:
        return [(item, item.cmd.namespace) for item in self.items]

    def hooked_results(self, result: list[Memory]) -> Sequence[Any]:
        return result

    def request(self) -> dict[str, Any]:
        """The batch as it is now (after any Modify): what an approval is bound to."""
        return {"memories": [item.request() for item in self.items]}

    def _plans(self, svc: Services, caller: Caller) -> list[attesting.SignedMemoryPlan | None]:
        keys, plans = attesting.snapshot(svc.keys), []
        for index, item in enumerate(self.items):
            cmd = item.cmd
            try:
                item.check_limits(svc)
                plans.append(attesting.plan_memory(
                    keys=keys, agent_id=caller.agent_id, namespace=cmd.namespace,
                    title=cmd.title, content=cmd.content, signature=cmd.signature,
                    signed_at=cmd.signed_at))
            except CortexError as exc:
                raise _at(index, exc) from None
        return plans

    async def execute(self, svc: Services, caller: Caller) -> list[Memory]:
        plans = self._plans(svc, caller)
        ids = batch_ids(settling.chosen_id(self.settlement) or uuid.uuid4(), len(self.items))
        mirror = svc.graph if svc.graph is not None and svc.graph.mirrors_writes else None
        new = [NewMemory(ids[i], item.cmd.namespace, item.cmd.title, item.cmd.content,
                         item.cmd.tags, item.cmd.metadata) for i, item in enumerate(self.items)]
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            cited = []
            for index, item in enumerate(self.items):
                try:
                    cited.append(await transcripts.check_citations(svc, caller, conn,
                                                                   item.cmd.citations))
                except CortexError as exc:
                    raise _at(index, exc) from None
            written = await rows.insert_many(conn, new, author=caller.agent_id,
                                             by=write_records.written_by(caller))
            await settling.check_cap(conn, self.settlement,
                                     adds=sum(item.stored_bytes() for item in self.items))
            for memory, spans in zip(written, cited, strict=True):
                if mirror is not None:
                    await mirror.on_memory_created(conn, memory.id, memory.namespace)
                if spans:
                    await transcripts.cite(conn, memory.id, spans)
            await write_records.record_stored(svc, conn, caller,
                                              list(zip(written, plans, strict=True)))
        for memory, item in zip(written, self.items, strict=True):
            await embedding.after_write(svc.vectors, svc.db, memory, item.vector)
        return written

    def post_payload(self, event: EventName, result: list[Memory]) -> dict[str, Any]:
        raise NotImplementedError(event)  # each item's own post payload (hooked)


async def store_batch(svc: Services, caller: Caller, cmd: StoreMemories) -> list[Memory]:
    """Store up to :data:`~.commands.MAX_BATCH` memories, all or nothing."""
    return await run(svc, caller, BatchStoreCall(cmd))


async def _written(svc: Services, first: uuid.UUID) -> list[Memory]:
    """A keyed batch's memories, by the ids that follow from its first (:func:`batch_ids`)."""
    async with svc.db.connection() as conn:
        return await rows.get_many(conn, batch_ids(first, MAX_BATCH))


def _encoded(_svc: Services, batch: list[Memory]) -> dict[str, Any]:
    return {"memories": [memory_view(m) for m in batch]}


#: The answer of a keyed batch (ADR 0030): its memories, in order.
MEMORIES = AnswerKind[list[Memory]]("memories", _encoded, _written)
