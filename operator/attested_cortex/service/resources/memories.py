"""Memory operations: store, get, update, delete, list, verify. Called by the HTTP routes.

Each is a :class:`~..pipeline.running.Call` run by :func:`..pipeline.running.run` (scope,
rules, hooks, quota, audit). Writes fire ``pre_index``/``post_index`` around the write because
the full-text index is computed in the same statement; a pre- hook's Modify is re-validated as
if a client had sent it. Every write appends its chain record (:mod:`..pipeline.write_records`)
in its own transaction (a plain store: in its own INSERT statement); an agent-signed store or
update (``signature``, ``signed_at``, checked after the hooks, over what is written) also keeps
the signature for ``GET /v1/memories/{id}/verify``. A store may cite spans of the caller's
transcripts (``citations``, checked before the INSERT and recorded after it, in its
transaction, by :mod:`.transcripts`; ``GET /v1/memories/{id}/replay`` reads them). A store or
update then gives the memory its vector for hybrid recall (:mod:`..workers.embedding`): after
the write committed, within ``timeout_ms``, else left to the backfill; a delete drops the
vector in the tombstoning transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload, payload_with
from attested_cortex.namespaces import parse_namespace
from attested_cortex.service.pipeline import attesting, outboxing, settling, write_records
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.pipeline.running import Call, Target, run, visible
from attested_cortex.service.resources import (
    answers,
    cursors,
    native_records,
    transcripts,
)
from attested_cortex.service.resources.commands import StoreMemory, UpdateMemory, check_sizes
from attested_cortex.service.resources.idempotency import AnswerKind
from attested_cortex.service.resources.views import memory_view
from attested_cortex.service.workers import embedding
from attested_cortex.store import memories as rows
from attested_cortex.store import signatures
from attested_cortex.store.events import PendingEvent
from attested_cortex.store.memories import Memory


def memory_bytes(*, namespace: str, content: str | None, title: str | None,
                 tags: Sequence[str] | None, metadata: dict[str, Any] | None) -> int:
    """What a memory's fields add to the storage quota: every byte the client sent that the
    row keeps (namespace, title, content, each tag, metadata unless empty), as the database's
    ``cortex_memory_bytes`` counts them (migration 0010); metadata is estimated from its JSON
    text (the database counts its ``jsonb`` text, which may differ by a few separators)."""
    size = sum(len(text.encode()) for text in (namespace, content or "", title or ""))
    size += sum(len(tag.encode()) for tag in tags or ())
    return size + (len(json.dumps(metadata).encode()) if metadata else 0)


async def _load(svc: Services, memory_id: uuid.UUID) -> Memory:
    async with svc.db.connection() as conn:
        return await rows.get(conn, memory_id)


def _index_payload(memory_id: str | None, namespace: str, reason: str,
                   fields: dict[str, Any]) -> dict[str, Any]:
    return payload("pre_index", memory_id=memory_id, namespace=namespace, reason=reason,
                   title=fields.get("title"), content=fields.get("content"),
                   tags=fields.get("tags"))


def _indexed(fields: dict[str, Any], changed: dict[str, Any]) -> dict[str, Any]:
    """A pre_index Modify of title/content/tags applied to the request's fields."""
    return {**fields, **{k: changed[k] for k in ("title", "content", "tags")
                         if changed.get(k) is not None}}


@dataclass
class StoreCall(Call[Memory]):
    """``POST /v1/memories``."""

    spec = ops.MEMORY_STORE
    settles = True
    cmd: StoreMemory
    # The client's vector (--embedder client) stays out of hook payloads and survives a Modify.
    vector: list[float] | None = None
    # The request its sizes were checked and measured for (a Modify makes a new one): each
    # is a JSON encoding of its metadata, done once per request, not at every step
    # (docs/adr/0075).
    _checked: StoreMemory | None = field(default=None, init=False, repr=False)
    _measured: tuple[StoreMemory, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.vector = self.cmd.embedding

    async def target(self, svc: Services, caller: Caller) -> Target:
        self.check_limits(svc)
        embedding.check_vector(svc.vectors, self.vector, namespace=self.cmd.namespace)
        return Target((self.cmd.namespace,), caller.agent_id, self.stored_bytes())

    def check_limits(self, svc: Services) -> None:
        """413 when the request's content or metadata is over its limit."""
        if self._checked is not self.cmd:
            check_sizes(svc.limits, content=self.cmd.content, metadata=self.cmd.metadata)
            self._checked = self.cmd

    def stored_bytes(self) -> int:
        cmd = self.cmd
        if self._measured is None or self._measured[0] is not cmd:
            self._measured = (cmd, memory_bytes(
                namespace=cmd.namespace, content=cmd.content, title=cmd.title, tags=cmd.tags,
                metadata=cmd.metadata))
        return self._measured[1]

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        if event == "pre_index":
            return _index_payload(None, self.cmd.namespace, "store", self.cmd.model_dump())
        # Citations appear in the payload only when the request has some (older hooks see
        # the payload they always saw).
        hidden = {"embedding"} | (set() if self.cmd.citations else {"citations"})
        return payload(event, **self.cmd.model_dump(exclude=hidden))

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        fields = self.cmd.model_dump(exclude={"embedding"})
        fields = _indexed(fields, changed) if event == "pre_index" else {
            k: v for k, v in changed.items() if k in StoreMemory.model_fields}
        fields.setdefault("citations", self.cmd.model_dump()["citations"])
        self.cmd = revalidate(StoreMemory, fields)

    async def execute(self, svc: Services, caller: Caller) -> Memory:
        cmd = self.cmd
        self.check_limits(svc)
        mirror = svc.graph if svc.graph is not None and svc.graph.mirrors_writes else None
        signed = attesting.plan_memory(
            keys=attesting.snapshot(svc.keys), agent_id=caller.agent_id, namespace=cmd.namespace,
            title=cmd.title, content=cmd.content, signature=cmd.signature,
            signed_at=cmd.signed_at)
        cap = self.settlement.cap
        if (mirror is None and signed is None and not cmd.citations and cap is not None
                and self.settlement.approval is None and self.settlement.claim is None
                and not (outboxing.enabled(svc) and outboxing.seals(svc))):
            memory = await self._one_statement(svc, caller, cap)
            await embedding.after_write(svc.vectors, svc.db, memory, self.vector)
            return memory
        # One transaction, its locks in the order of every write (ADR 0017): the approval,
        # the row and its author's usage row (the trigger), the chain lock last.
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            cited = await transcripts.check_citations(svc, caller, conn, cmd.citations)
            memory = await rows.insert(
                conn, namespace=cmd.namespace, title=cmd.title, content=cmd.content,
                tags=cmd.tags, metadata=cmd.metadata, author=caller.agent_id,
                memory_id=settling.chosen_id(self.settlement) or uuid.uuid4(),
                by=write_records.written_by(caller),
            )
            await settling.check_cap(conn, self.settlement, adds=self.stored_bytes())
            if mirror is not None:
                await mirror.on_memory_created(conn, memory.id, memory.namespace)
            await transcripts.cite(conn, memory.id, cited)
            await write_records.record_memory(svc, conn, caller, "memory.stored", memory,
                                              signed.signature if signed else None)
            if signed is not None:
                await write_records.record_signed_memory(conn, caller, memory, signed)
        # After the write committed: queued for the write-behind embedder (never waited on).
        await embedding.after_write(svc.vectors, svc.db, memory, self.vector)
        return memory

    async def _one_statement(self, svc: Services, caller: Caller, cap: settling.Cap) -> Memory:
        """The store with nothing else to write: one statement, in the same lock order (the
        usage row locked and the cap checked first, the chain record last), without the
        BEGIN and COMMIT round trips (the chain lock is held for the statement only)."""
        cmd, memory_id, adds = self.cmd, uuid.uuid4(), self.stored_bytes()

        def record(stored: rows.Stored) -> PendingEvent:
            return write_records.pending_memory(svc, caller, "memory.stored",
                                                _as_stored(memory_id, cmd, caller, stored))

        try:
            async with svc.db.connection() as conn:
                return await rows.insert_recorded(
                    conn, namespace=cmd.namespace, title=cmd.title, content=cmd.content,
                    tags=cmd.tags, metadata=cmd.metadata, author=caller.agent_id,
                    memory_id=memory_id, event=record, adds=adds, cap=cap.limit,
                    by=write_records.written_by(caller),
                    outbox_event=outboxing.memory_event("memory.stored", _as_written(
                        memory_id, cmd, caller)) if outboxing.enabled(svc) else None)
        except rows.CapReachedError as exc:
            raise settling.over_cap(cap, used=exc.used, adds=adds) from exc

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return _post_write(event, result, "store")


def _as_stored(memory_id: uuid.UUID, cmd: StoreMemory, caller: Caller,
               stored: rows.Stored | None) -> Memory:
    """The row a store will write (what its record covers), before it is written; without
    ``stored`` as it reads plain (the outbox event's view, its times the row's)."""
    now, by = datetime.now(UTC), write_records.written_by(caller)
    return Memory(id=memory_id, namespace=cmd.namespace, title=cmd.title, content=cmd.content,
                  tags=tuple(cmd.tags), metadata=cmd.metadata, author=caller.agent_id,
                  revision=1, created_at=now, updated_at=now, deleted_at=None,
                  key_version=None if stored is None else stored.key_version,
                  sealed_sha256=None if stored is None else stored.sealed_sha256,
                  written_tier=by.tier, written_scopes=by.scopes,
                  written_allowed=by.allowed)


def _as_written(memory_id: uuid.UUID, cmd: StoreMemory, caller: Caller) -> Memory:
    return _as_stored(memory_id, cmd, caller, None)


def _post_write(event: EventName, memory: Memory, reason: str) -> dict[str, Any]:
    if event == "post_index":
        return payload(event, memory_id=str(memory.id), namespace=memory.namespace,
                       reason=reason, revision=memory.revision)
    return payload(event, **memory_view(memory))


@dataclass
class GetCall(Call[Memory]):
    """``GET /v1/memories/{id}`` (a tombstone reads as deleted, with no content)."""

    spec = ops.MEMORY_GET
    memory_id: uuid.UUID
    found: Memory | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        self.found = await _load(svc, self.memory_id)
        return Target((self.found.namespace,), self.found.author)

    async def execute(self, svc: Services, caller: Caller) -> Memory:
        assert self.found is not None
        async with svc.db.connection() as conn:
            await native_records.require_readable(svc, conn, caller, self.found.id,
                                                  self.found.namespace)
        return self.found


@dataclass
class UpdateCall(Call[Memory]):
    """``PATCH /v1/memories/{id}``: change fields and bump the revision."""

    spec = ops.MEMORY_UPDATE
    settles = True
    memory_id: uuid.UUID
    cmd: UpdateMemory
    current: Memory | None = None
    vector: list[float] | None = None

    def __post_init__(self) -> None:
        self.vector = self.cmd.embedding

    async def target(self, svc: Services, caller: Caller) -> Target:
        check_sizes(svc.limits, content=self.cmd.content, metadata=self.cmd.metadata)
        self.current = current = await _load(svc, self.memory_id)
        embedding.check_vector(svc.vectors, self.vector, namespace=current.namespace)
        return Target((current.namespace,), current.author, max(0, self._grows(current)))

    def _grows(self, current: Memory) -> int:
        """What the update adds to the author's stored bytes (negative: frees)."""
        cmd = self.cmd
        return memory_bytes(namespace="", content=cmd.content, title=cmd.title, tags=cmd.tags,
                            metadata=cmd.metadata) - memory_bytes(
            namespace="", content=current.content if cmd.content is not None else None,
            title=current.title if cmd.title is not None else None,
            tags=current.tags if cmd.tags is not None else None,
            metadata=current.metadata if cmd.metadata is not None else None)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        assert self.current is not None
        changes = self.cmd.model_dump(exclude_unset=True, exclude={"embedding"})
        if event == "pre_index":
            return _index_payload(str(self.memory_id), self.current.namespace, "update",
                                  changes)
        return payload(event, id=str(self.memory_id), namespace=self.current.namespace,
                       author=self.current.author, changes=changes)

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        fields = self.cmd.model_dump(exclude_unset=True, exclude={"embedding"})
        if event == "pre_index":
            fields = _indexed(fields, changed)
        else:
            given = changed.get("changes")
            fields = given if isinstance(given, dict) else {}
        self.cmd = revalidate(UpdateMemory, fields)

    async def execute(self, svc: Services, caller: Caller) -> Memory:
        cmd = self.cmd
        check_sizes(svc.limits, content=cmd.content, metadata=cmd.metadata)
        changes = cmd.model_dump(exclude_unset=True,
                                 exclude={"expected_revision", "signature", "signed_at",
                                          "embedding"})
        changes = {k: v for k, v in changes.items() if v is not None}
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            locked = await rows.get(conn, self.memory_id, for_update=True)
            await native_records.native_write(svc, conn, self.memory_id)  # ADR 0084
            await write_records.require_recorded_memory(conn, locked)  # ADR 0018
            memory = await rows.update(
                conn, locked, changes=changes, expected_revision=cmd.expected_revision,
                by=write_records.written_by(caller))
            await settling.check_cap(conn, self.settlement, adds=self._grows(locked))
            signed = attesting.plan_memory(
                keys=attesting.snapshot(svc.keys), agent_id=caller.agent_id,
                namespace=memory.namespace, title=memory.title, content=memory.content,
                signature=cmd.signature, signed_at=cmd.signed_at)
            await write_records.record_memory(svc, conn, caller, "memory.updated", memory,
                                              signed.signature if signed else None)
            if signed is not None:
                await write_records.record_signed_memory(conn, caller, memory, signed)
        await embedding.after_write(svc.vectors, svc.db, memory, self.vector)
        return memory

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return _post_write(event, result, "update")


@dataclass
class DeleteCall(Call[Memory]):
    """``DELETE /v1/memories/{id}``: the content goes, the row (and link history) stays."""

    spec = ops.MEMORY_DELETE
    settles = True
    memory_id: uuid.UUID
    current: Memory | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        self.current = await _load(svc, self.memory_id)
        return Target((self.current.namespace,), self.current.author)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        assert self.current is not None
        return payload(event, id=str(self.memory_id), namespace=self.current.namespace,
                       author=self.current.author)

    async def execute(self, svc: Services, caller: Caller) -> Memory:
        assert self.current is not None
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            locked = await rows.get(conn, self.memory_id, for_update=True)
            if not locked.deleted:
                await native_records.native_write(svc, conn, self.memory_id)  # ADR 0084
                await write_records.require_recorded_memory(conn, locked)  # ADR 0018
            memory = await rows.tombstone(conn, locked, by=write_records.written_by(caller))
            if svc.graph is not None and not locked.deleted:
                await svc.graph.on_memory_tombstoned(conn, memory.id)
            if not locked.deleted:  # deleting twice writes nothing, so records nothing
                await write_records.record_memory(svc, conn, caller, "memory.deleted", memory)
            await embedding.forget(svc.vectors, conn, memory.id)
        return memory

    def post_payload(self, event: EventName, result: Memory) -> dict[str, Any]:
        return payload(event, **memory_view(result))


@dataclass
class VerifyCall(Call[dict[str, Any]]):
    """``GET /v1/memories/{id}/verify``: re-verify the agent signature of a memory's current
    revision from its row and the keyring."""

    spec = ops.MEMORY_VERIFY
    memory_id: uuid.UUID
    found: Memory | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        self.found = await _load(svc, self.memory_id)
        return Target((self.found.namespace,), self.found.author)

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        assert self.found is not None
        async with svc.db.connection() as conn:
            await native_records.require_readable(svc, conn, caller, self.found.id,
                                                  self.found.namespace)
            signature = await signatures.for_revision(conn, self.found.id, self.found.revision)
        return attesting.memory_verification(self.found, signature,
                                             attesting.snapshot(svc.keys))


def _cursor(memory: Memory) -> str:
    return cursors.encode((memory.created_at, memory.id))


@dataclass(frozen=True)
class MemoryPage:
    """One page of a listing: its memories (the caller may read), whether more may follow,
    and the cursor of the next page (None at the end)."""

    memories: tuple[Memory, ...]
    next: str | None
    truncated: bool

    def view(self) -> dict[str, Any]:
        """The ``GET /v1/memories`` answer."""
        return {"memories": [memory_view(m) for m in self.memories],
                "truncated": self.truncated, "next": self.next}


@dataclass
class ListCall(Call[MemoryPage]):
    """``GET /v1/memories``: live memories of a namespace subtree, newest first by creation,
    one page after ``cursor``. Memories in namespaces the caller may not read are left out;
    the page also stops at the answer's byte bound (ADR 0020) and says so."""

    spec = ops.MEMORY_LIST
    namespace: str | None
    limit: int
    cursor: str | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        return Target((self.namespace,) if self.namespace is not None else ())

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, query=None, namespace=self.namespace, limit=self.limit)

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        namespace = changed.get("namespace", self.namespace)
        self.namespace = None if namespace is None else parse_namespace(str(namespace))

    async def execute(self, svc: Services, caller: Caller) -> MemoryPage:
        before = cursors.decode(self.cursor) if self.cursor is not None else None
        budget = svc.limits.max_answer_bytes
        async with svc.db.connection() as conn:
            listed = await rows.list_namespace(conn, namespace=self.namespace,
                                               limit=self.limit, before=before,
                                               max_bytes=budget)
        shown = [m for m in listed.memories
                 if not native_records.hides(svc, caller, m.id, m.namespace, listed.records)
                 and visible(svc, caller, self.spec, m.namespace)]
        kept = len(answers.fitting(shown, memory_view, max_bytes=budget))
        if kept < len(shown):  # cut by the answer's bytes: go on after the last one shown
            return MemoryPage(tuple(shown[:kept]), _cursor(shown[kept - 1]), True)
        if listed.more:  # go on after the last row read (shown or not)
            return MemoryPage(tuple(shown), _cursor(listed.memories[-1]), True)
        return MemoryPage(tuple(shown), None, False)

    def post_payload(self, event: EventName, result: MemoryPage) -> dict[str, Any]:
        return payload_with(event, {"results": [memory_view(m) for m in result.memories]},
                            query=None, namespace=self.namespace, limit=self.limit,
                            truncated=result.truncated)


async def store(svc: Services, caller: Caller, cmd: StoreMemory) -> Memory:
    """Store a new memory."""
    return await run(svc, caller, StoreCall(cmd))


async def get(svc: Services, caller: Caller, memory_id: uuid.UUID) -> Memory:
    """Read one memory."""
    return await run(svc, caller, GetCall(memory_id))


async def update(svc: Services, caller: Caller, memory_id: uuid.UUID, cmd: UpdateMemory) -> Memory:
    """Change a memory's fields (its author, or an agent granted more)."""
    return await run(svc, caller, UpdateCall(memory_id, cmd))


async def delete(svc: Services, caller: Caller, memory_id: uuid.UUID) -> Memory:
    """Tombstone a memory (its author, or an agent granted more)."""
    return await run(svc, caller, DeleteCall(memory_id))


async def verify(svc: Services, caller: Caller, memory_id: uuid.UUID) -> dict[str, Any]:
    """Re-verify the agent signature of a memory's current revision."""
    return await run(svc, caller, VerifyCall(memory_id))


async def search(
    svc: Services, caller: Caller, *, namespace: str | None, limit: int,
    cursor: str | None = None,
) -> MemoryPage:
    """One page of the live memories of a namespace subtree, newest first by creation."""
    return await run(svc, caller, ListCall(namespace, limit, cursor))


async def _written(svc: Services, memory_id: uuid.UUID) -> Memory:
    async with svc.db.connection() as conn:
        return await rows.get(conn, memory_id)


#: The answer of a keyed store, update or delete (ADR 0030): the memory as written.
MEMORY = AnswerKind[Memory]("memory", lambda _svc, memory: memory_view(memory), _written)
