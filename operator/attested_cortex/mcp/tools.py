"""The MCP tools, declared once: name, description, argument model, service call.

Every tool is one :class:`Tool` entry in :data:`TOOLS`. Its argument model is the pydantic
model the HTTP API validates the same operation's input with (the request bodies of
:mod:`attested_cortex.service.resources.commands` and
:mod:`~attested_cortex.service.resources.graph_commands`, the path and query models of
:mod:`~attested_cortex.service.resources.queries`), so the tool's JSON schema and the
OpenAPI document come from one definition. Its ``run`` calls the same service function the
route calls, which runs the operation pipeline (scope, rules, hooks, quota,
audit); nothing here decides anything.

Adding a tool is one entry: ``Tool("name", "what it does", ArgumentModel, run)`` where
``run`` answers a JSON object (wrap a list in an object). Callers: :mod:`.calling` (tools/call) and
:mod:`.serving` (tools/list).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from attested_cortex.namespaces import parse_namespace
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources import (
    approvals_api,
    audit_proofs,
    auditing,
    batches,
    federation,
    introspection,
    kg,
    links,
    memories,
    recall,
    receipts,
    subscriptions_api,
    transcripts,
)
from attested_cortex.service.resources.approvals_api import ListApprovals, SignedDecision
from attested_cortex.service.resources.commands import RecallQuery, StoreMemories, StoreMemory
from attested_cortex.service.resources.federation_wire import QuarantineQuery
from attested_cortex.service.resources.graph_commands import (
    CreateLink,
    InvalidateLink,
    KgPaths,
    KgQuery,
)
from attested_cortex.service.resources.idempotency import AnswerKind
from attested_cortex.service.resources.queries import (
    AuditQuery,
    ConsistencyQuery,
    LinkRef,
    ListMemories,
    MemoryRead,
    MemoryRef,
    ProofQuery,
    TimelineQuery,
    UpdateMemoryById,
)
from attested_cortex.service.resources.spoke import dispatch as spoke_dispatch
from attested_cortex.service.resources.subscription_commands import (
    CreateSubscription,
    DeadLetterRef,
    DeadLettersByName,
    ReplayDeadByName,
    ReplayFromByName,
    SubscriptionRef,
    UpdateSubscriptionByName,
)
from attested_cortex.service.resources.transcript_commands import ReplayMemory, StoreTranscript
from attested_cortex.service.resources.views import memory_view
from attested_cortex.spoke.operations import negotiate
from attested_cortex.spoke.requests import DispatchTool

A = TypeVar("A", bound=BaseModel)
T = TypeVar("T")
#: A tool's answer: a JSON object (MCP structured content must be an object).
Answer = dict[str, Any]


class NoArguments(BaseModel):
    """A tool without arguments."""

    model_config = {"extra": "forbid", "strict": True, "frozen": True}


def _created(_arguments: BaseModel) -> uuid.UUID | None:
    return None


@dataclass(frozen=True)
class Keyed(Generic[A, T]):
    """A write an Idempotency-Key makes happen once (ADR 0030): the service write, the kind
    of answer it makes (declared by its resource module: its encoder, and how a lost answer is
    read back) and the id of the object an update changes (None: a create)."""

    write: Callable[[Services, Caller, A], Awaitable[T]]
    answer: AnswerKind[T]
    resource: Callable[[A], uuid.UUID | None] = _created

    async def run(self, svc: Services, caller: Caller, a: A) -> Answer:
        """The write answered as its answer kind encodes it (the tool's ``run``)."""
        return self.answer.encode(svc, await self.write(svc, caller, a))


@dataclass(frozen=True)
class Tool(Generic[A]):
    """One MCP tool: what it is called, what it takes, which service call it makes."""

    name: str
    description: str
    arguments: type[A]
    run: Callable[[Services, Caller, A], Awaitable[Answer]]
    read_only: bool = False
    #: A write an Idempotency-Key makes happen once (ADR 0030); its ``run`` is ``run``.
    keyed: Keyed[A, Any] | None = None

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (what tools/list advertises)."""
        schema = self.arguments.model_json_schema(mode="validation")
        schema.setdefault("properties", {})
        return schema


_store = Keyed(memories.store, memories.MEMORY)
_store_batch = Keyed(batches.store_batch, batches.MEMORIES)
_transcript_store = Keyed(transcripts.store_transcript, transcripts.TRANSCRIPT)


async def _replay(svc: Services, caller: Caller, a: ReplayMemory) -> Answer:
    return await transcripts.replay(svc, caller, a)


async def _get(svc: Services, caller: Caller, a: MemoryRead) -> Answer:
    memory = await memories.get(svc, caller, a.id)
    view = memory_view(memory)
    if a.receipts:
        view["receipts"] = await receipts.receipts(svc, (memory,))
    return view


# (a Memory: the MCP layer names no store type)
async def _updated(svc: Services, caller: Caller, a: UpdateMemoryById) -> Any:
    return await memories.update(svc, caller, a.id, a.fields())


async def _deleted(svc: Services, caller: Caller, a: MemoryRef) -> Any:
    return await memories.delete(svc, caller, a.id)


_update = Keyed(_updated, memories.MEMORY, lambda a: a.id)
_forget = Keyed(_deleted, memories.MEMORY, lambda a: a.id)


async def _list(svc: Services, caller: Caller, a: ListMemories) -> Answer:
    namespace = parse_namespace(a.namespace) if a.namespace is not None else None
    page = await memories.search(svc, caller, namespace=namespace, limit=a.limit,
                                 cursor=a.cursor)
    view = page.view()
    if a.receipts:
        view["receipts"] = await receipts.receipts(svc, page.memories)
    return view


async def _recall(svc: Services, caller: Caller, a: RecallQuery) -> Answer:
    result = await recall.recall(svc, caller, a)
    view = recall.result_view(result)
    if a.receipts:
        view["receipts"] = await receipts.receipts(svc, [h.memory for h in result.hits])
    return view


_link = Keyed(links.create, links.LINK, lambda a: a.id)
_invalidate = Keyed(links.invalidate, links.LINK, lambda a: a.link_id)


async def _kg_query(svc: Services, caller: Caller, a: KgQuery) -> Answer:
    return await kg.query(svc, caller, a)


async def _kg_paths(svc: Services, caller: Caller, a: KgPaths) -> Answer:
    return await kg.paths(svc, caller, a)


async def _kg_timeline(svc: Services, caller: Caller, a: TimelineQuery) -> Answer:
    return await kg.timeline(svc, caller, a.memory_id)


async def _link_verify(svc: Services, caller: Caller, a: LinkRef) -> Answer:
    return await links.verify(svc, caller, a.id)


async def _memory_verify(svc: Services, caller: Caller, a: MemoryRef) -> Answer:
    return await memories.verify(svc, caller, a.id)


async def _audit_verify(svc: Services, caller: Caller, a: AuditQuery) -> Answer:
    return await auditing.verify(svc, caller, deep=a.deep)


async def _audit_checkpoint(svc: Services, caller: Caller, a: NoArguments) -> Answer:
    return await audit_proofs.checkpoint(svc, caller)


async def _audit_proof(svc: Services, caller: Caller, a: ProofQuery) -> Answer:
    return await audit_proofs.proof(svc, caller, a)


async def _audit_consistency(svc: Services, caller: Caller, a: ConsistencyQuery) -> Answer:
    return await audit_proofs.consistency(svc, caller, a)


async def _capabilities(svc: Services, caller: Caller, a: NoArguments) -> Answer:
    return await introspection.describe(svc, caller)


async def _approvals(svc: Services, caller: Caller, a: ListApprovals) -> Answer:
    return await approvals_api.pending(svc, caller, a)


async def _approval_decide(svc: Services, caller: Caller, a: SignedDecision) -> Answer:
    return await approvals_api.decide_signed(svc, caller, a)


async def _federation_quarantine(svc: Services, caller: Caller, a: QuarantineQuery) -> Answer:
    return await federation.quarantine(svc, caller, after=a.after, limit=a.limit)


async def _spoke_memory(svc: Services, caller: Caller, a: DispatchTool) -> Answer:
    # The flags are negotiated per call, as per request over HTTP (ADR 0061, ADR 0067).
    return await spoke_dispatch.dispatch(
        svc, caller, op=a.op, request=a.request, key=a.idempotency_key or caller.idempotency_key,
        negotiated=negotiate(a.capabilities, field="capabilities"))


async def _sub_create(svc: Services, caller: Caller, a: CreateSubscription) -> Answer:
    return await subscriptions_api.create(svc, caller, a)


async def _sub_list(svc: Services, caller: Caller, a: NoArguments) -> Answer:
    return await subscriptions_api.listed(svc, caller)


async def _sub_get(svc: Services, caller: Caller, a: SubscriptionRef) -> Answer:
    return await subscriptions_api.get(svc, caller, a.name)


async def _sub_update(svc: Services, caller: Caller, a: UpdateSubscriptionByName) -> Answer:
    return await subscriptions_api.update(svc, caller, a.name, a.changes())


async def _sub_delete(svc: Services, caller: Caller, a: SubscriptionRef) -> Answer:
    return await subscriptions_api.delete(svc, caller, a.name)


async def _sub_replay(svc: Services, caller: Caller, a: ReplayFromByName) -> Answer:
    return await subscriptions_api.replay(svc, caller, a.name, a)


async def _dead_list(svc: Services, caller: Caller, a: DeadLettersByName) -> Answer:
    return await subscriptions_api.dead_letters(svc, caller, a.name, after=a.after,
                                                limit=a.limit)


async def _dead_get(svc: Services, caller: Caller, a: DeadLetterRef) -> Answer:
    return await subscriptions_api.dead_letter(svc, caller, a.name, a.sequence)


async def _dead_replay(svc: Services, caller: Caller, a: ReplayDeadByName) -> Answer:
    return await subscriptions_api.replay_dead(svc, caller, a.name, a)


async def _dead_purge(svc: Services, caller: Caller, a: SubscriptionRef) -> Answer:
    return await subscriptions_api.purge_dead(svc, caller, a.name)


#: The webhook subscription tools (issue 41): each needs subscriptions.manage held bare.
_SUBSCRIPTION_TOOLS: tuple[Tool[Any], ...] = (
    Tool("subscription_create", "Create a webhook subscription: a target URL, the post_* "
         "events and namespace patterns it receives; the generated secret is in this answer "
         "only (needs subscriptions.manage).", CreateSubscription, _sub_create),
    Tool("subscription_list", "Every webhook subscription with its lag, last success and "
         "failure and dead letters.", NoArguments, _sub_list, read_only=True),
    Tool("subscription_get", "One webhook subscription and its delivery state.",
         SubscriptionRef, _sub_get, read_only=True),
    Tool("subscription_update", "Change a webhook subscription (omitted fields stay).",
         UpdateSubscriptionByName, _sub_update),
    Tool("subscription_delete", "Delete a webhook subscription and its dead letters.",
         SubscriptionRef, _sub_delete),
    Tool("subscription_replay", "Deliver every event again from `from_sequence` on (a "
         "receiver that lost its state).", ReplayFromByName, _sub_replay),
    Tool("dead_letters_list", "A subscription's dead letters (events that exhausted their "
         "retries), oldest first, one page.", DeadLettersByName, _dead_list, read_only=True),
    Tool("dead_letter_get", "One dead letter with its payload.", DeadLetterRef, _dead_get,
         read_only=True),
    Tool("dead_letters_replay", "Deliver one dead letter (`sequence`) or each, once, now; "
         "the delivered ones leave the queue.", ReplayDeadByName, _dead_replay),
    Tool("dead_letters_purge", "Drop every dead letter of a subscription.", SubscriptionRef,
         _dead_purge),
)

#: Every tool, in the order tools/list shows them.
TOOLS: tuple[Tool[Any], ...] = (
    Tool("memory_store", "Store a memory: text in a `/`-separated namespace, with an "
         "optional title, tags and metadata. Answers the stored memory (its id).",
         StoreMemory, _store.run, keyed=_store),
    Tool("memory_store_batch", "Store up to 1,000 memories at once, all or nothing (each as "
         "memory_store would; a refusal names the memory's `index`). Answers them in order.",
         StoreMemories, _store_batch.run, keyed=_store_batch),
    Tool("memory_recall", "Recall the memories that best match a natural-language query, "
         "best first; `budget_tokens` fills results greedily up to that many tokens "
         "(about 4 characters each), `namespace` searches it and its ancestors.",
         RecallQuery, _recall, read_only=True),
    Tool("memory_get", "Read one memory by id.", MemoryRead, _get, read_only=True),
    Tool("memory_update", "Change a memory's content, title, tags or metadata (only its "
         "author may); omitted fields stay. `expected_revision` refuses a concurrent change.",
         UpdateMemoryById, _update.run, keyed=_update),
    Tool("memory_forget", "Delete a memory (a tombstone stays; only its author may).",
         MemoryRef, _forget.run, keyed=_forget),
    Tool("memory_list", "List the live memories of a namespace and its children, newest "
         "first by creation, one page at a time: pass the answer's `next` as `cursor`.",
         ListMemories, _list, read_only=True),
    Tool("memory_verify", "Re-verify the agent signature of a memory's current revision.",
         MemoryRef, _memory_verify, read_only=True),
    Tool("link_create", "Link two memories with a relation (related_to, supersedes, "
         "contradicts, derived_from or x-<name>), optionally valid from/until an instant and "
         "signed by the agent's Ed25519 key.", CreateLink, _link.run,
         keyed=_link),
    Tool("link_invalidate", "Close a link's validity window (only the agent that observed "
         "it may).", InvalidateLink, _invalidate.run, keyed=_invalidate),
    Tool("link_verify", "Re-verify a stored link's signature from its row.", LinkRef,
         _link_verify, read_only=True),
    Tool("kg_query", "Memories reachable from a start memory within `depth` (1..5) links, "
         "optionally only some relations, as valid at an instant.", KgQuery, _kg_query,
         read_only=True),
    Tool("kg_paths", "Simple paths between two memories (1..7 hops), shortest first.",
         KgPaths, _kg_paths, read_only=True),
    Tool("kg_timeline", "A memory's links ordered by validity (history included).",
         TimelineQuery, _kg_timeline, read_only=True),
    Tool("audit_verify", "Verify the whole signed audit chain (and, with deep, every memory "
         "and link row against its write record).", AuditQuery, _audit_verify,
         read_only=True),
    Tool("audit_checkpoint", "The latest signed checkpoint of the audit tree (C2SP "
         "tlog-checkpoint: origin, size, root hash; the note as signed).", NoArguments,
         _audit_checkpoint, read_only=True),
    Tool("audit_proof", "The RFC 9162 inclusion proof of audit event `seq` in a checkpointed "
         "tree (a receipt to check against any witness-cosigned checkpoint).", ProofQuery,
         _audit_proof, read_only=True),
    Tool("audit_consistency", "The RFC 9162 consistency proof that the tree of `to` events "
         "extends the tree of `from` events.", ConsistencyQuery, _audit_consistency,
         read_only=True),
    Tool("capabilities", "What this cortex is and does now: schema, recall mode, graph "
         "backend, permissions, hooks, quotas and your usage, limits, the MCP endpoint.",
         NoArguments, _capabilities, read_only=True),
    Tool("transcript_store", "Store a conversation or reasoning trail (zstd at rest) in a "
         "namespace where transcripts are enabled; cite its spans from memory_store's "
         "`citations` ({transcript_id, start, end}: Unicode code points, not UTF-16 "
         "units; end exclusive).",
         StoreTranscript, _transcript_store.run, keyed=_transcript_store),
    Tool("memory_replay", "The transcript spans a memory cites (full: each cited transcript "
         "whole); only its author may, and pruned transcripts say so.", ReplayMemory,
         _replay, read_only=True),
    Tool("approvals_list", "Actions held for a human's approval (AskUser), oldest first, one "
         "page (`next` is the cursor of the following one; needs the approvals.decide "
         "scope).", ListApprovals, _approvals, read_only=True),
    Tool("approval_decide", "Approve or reject a held action. The decision carries the "
         "approver's HMAC (the approval secret signs "
         "'{timestamp}.POST./v1/approvals/{id}.{\"decision\":...}'), so an agent alone "
         "cannot approve itself.", SignedDecision, _approval_decide),
    Tool("spoke_memory", "Run one op of the spoke-memory family (seed 001; docs/"
         "spoke-memory.md): `op` is its `memory.*` name, `request` its request, "
         "`capabilities` the flags this call negotiates (default [\"spoke-memory\"]; add "
         "spoke-memory-reflection or spoke-memory-transfer for those ops). A read answers its "
         "payload, a write its MemoryReceipt; `idempotency_key` makes a write happen once.",
         DispatchTool, _spoke_memory),
    Tool("federation_quarantine", "Changes federation peers sent that were unsigned or did "
         "not verify, held apart and never recalled, oldest first (`next`: pass as `after`; "
         "needs audit.read).", QuarantineQuery, _federation_quarantine, read_only=True),
    *_SUBSCRIPTION_TOOLS,
)

#: The tools by name.
BY_NAME: Mapping[str, Tool[Any]] = {tool.name: tool for tool in TOOLS}
