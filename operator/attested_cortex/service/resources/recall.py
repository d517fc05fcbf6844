"""Recall: pre_recall hook -> query vector (hybrid mode: embedded within its deadline, or sent
by the client) -> bounded full-text + vector recall, fused -> read isolation -> token budget ->
post_recall hook, run through the operation pipeline (:mod:`..pipeline.running`). Called by
``POST /v1/recall``.

A post_recall hook may reorder and drop the hits (a reranker, docs/adr/0071): the hook layer
screens its answer (:mod:`attested_cortex.hooks.reordering`) and :meth:`RecallCall.post_answer`
takes only ids and scores from it, so every hit returned is one recall found, as stored.
With ``explain`` the answer says what happened (``rerank``) and each reordered hit where the
fusion had put it (``explain.fused``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from attested_cortex import tasks
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload, payload_with
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, ChainOutcome, Services
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.pipeline.running import Call, Target, run, visible
from attested_cortex.service.resources import answers, native_records
from attested_cortex.service.resources.commands import RecallQuery
from attested_cortex.service.resources.views import memory_view
from attested_cortex.service.workers import embedding
from attested_cortex.store import recall as store_recall
from attested_cortex.store.database import Conn
from attested_cortex.store.recall import Hit


@dataclass(frozen=True)
class RecallResult:
    """Ranked hits and whether the token budget or the answer's bytes cut any of them
    (``omitted``: the ids of ranked hits past the byte bound, in rank order)."""

    hits: tuple[Hit, ...]
    truncated: bool
    tokens: int
    mode: str = "fulltext"
    degraded: str | None = None
    explain: bool = False
    omitted: tuple[str, ...] = ()
    #: What the post_recall hooks did to the order (None: no hook ran).
    rerank: str | None = None
    #: Reordered hits' fused rank and score, by id (empty: the fused order stands).
    fused: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    #: The hits' API views, made once: by :func:`bound_bytes` (which measures them), or when
    #: a post_recall chain was sent exactly these hits and left them as they were; None once
    #: a chain reordered the hits.
    views: tuple[dict[str, Any], ...] | None = field(default=None, compare=False, repr=False)


def estimate_tokens(hit: Hit) -> int:
    """A model-agnostic token estimate: about four characters per token."""
    return max(1, math.ceil((len(hit.memory.title) + len(hit.memory.content)) / 4))


def apply_budget(hits: list[Hit], budget: int | None) -> RecallResult:
    """Keep hits in rank order while they fit; a hit that does not fit is skipped.

    Greedy: a large hit is passed over and smaller, lower-ranked ones may still fill the
    budget. ``truncated`` says whether anything was dropped.
    """
    if budget is None:
        return RecallResult(tuple(hits), False, sum(estimate_tokens(h) for h in hits))
    kept: list[Hit] = []
    used = 0
    for hit in hits:
        cost = estimate_tokens(hit)
        if used + cost <= budget:
            kept.append(hit)
            used += cost
    return RecallResult(tuple(kept), len(kept) < len(hits), used)


def hit_view(hit: Hit, *, explain: bool = False,
             fused: tuple[int, float] | None = None) -> dict[str, Any]:
    """A hit as API JSON: ``embedded`` (hybrid mode) says whether it has a current vector;
    ``fused``: its rank and score before a hook reordered the hits."""
    view = {**memory_view(hit.memory), "score": round(hit.score, 6)}
    if hit.embedded is not None:
        view["embedded"] = hit.embedded
    if explain and hit.parts is not None:
        view["explain"] = hit.parts.as_dict()
    if explain and fused is not None:
        view.setdefault("explain", {})["fused"] = {"rank": fused[0], "score": round(fused[1], 6)}
    return view


def _view(result: RecallResult) -> Callable[[Hit], dict[str, Any]]:
    return lambda h: hit_view(h, explain=result.explain, fused=result.fused.get(str(h.memory.id)))


def bound_bytes(result: RecallResult, max_bytes: int) -> RecallResult:
    """Keep the leading hits whose JSON fits ``max_bytes`` (ADR 0020); the rest are named by
    id in ``omitted_ids`` (``GET /v1/memories/{id}`` reads each)."""
    views = tuple(answers.fitting(result.hits, _view(result), max_bytes=max_bytes))
    kept = len(views)
    if kept == len(result.hits):
        return replace(result, views=views)  # the answer's own, made once
    hits = result.hits[:kept]
    return replace(result, hits=hits, truncated=True,
                   tokens=sum(estimate_tokens(h) for h in hits), views=views,
                   omitted=tuple(str(h.memory.id) for h in result.hits[kept:]))


def result_view(result: RecallResult) -> dict[str, Any]:
    """The ``POST /v1/recall`` answer."""
    views = result.views
    body: dict[str, Any] = {
        "results": list(views) if views is not None else [_view(result)(h) for h in result.hits],
        "truncated": result.truncated,
        "omitted_ids": list(result.omitted),
        "tokens": result.tokens,
        "mode": result.mode,
    }
    if result.degraded is not None:
        body["degraded"] = result.degraded
    if result.explain and result.rerank is not None:
        body["rerank"] = result.rerank
    return body


def reordered(result: RecallResult, answer: ChainOutcome) -> RecallResult:
    """``result`` in the order a post_recall chain left its ``results`` (ids and scores
    only: the hits themselves are recall's own), and the chain's note."""
    result = replace(result, rerank=answer.reorder_note)
    if not answer.modified:
        return result
    result = replace(result, views=None)  # made for the fused order
    by_id = {str(h.memory.id): (rank, h) for rank, h in enumerate(result.hits, start=1)}
    hits: list[Hit] = []
    for entry in answer.payload.get("results", ()):
        found = by_id.get(str(entry.get("id")))
        if found is not None:  # screened already; anything else is not recall's to return
            hits.append(replace(found[1], score=float(entry["score"])))
    fused = {key: (rank, hit.score) for key, (rank, hit) in by_id.items()}
    return replace(result, hits=tuple(hits), tokens=sum(estimate_tokens(h) for h in hits),
                   fused={str(h.memory.id): fused[str(h.memory.id)] for h in hits})


@dataclass
class RecallCall(Call[RecallResult]):
    """``POST /v1/recall``: hits from namespaces the caller may not read are dropped before
    the budget is applied, so a recall never returns them."""

    spec = ops.RECALL
    query: RecallQuery
    #: The result whose hit views the post_recall payload carries, and those views.
    _sent: tuple[RecallResult, list[dict[str, Any]]] | None = field(
        default=None, init=False, repr=False)

    async def target(self, svc: Services, caller: Caller) -> Target:
        embedding.check_vector(svc.vectors, self.query.embedding, query=True)
        ns = self.query.namespace
        return Target((ns,) if ns is not None else ())

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, **self._hooked())

    def _hooked(self) -> dict[str, Any]:
        """The query as hooks see it: the client's vector and ``explain`` stay out."""
        return self.query.model_dump(exclude=_NOT_HOOKED)

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        fields = {k: v for k, v in changed.items()
                  if k in RecallQuery.model_fields and k not in _NOT_HOOKED}
        # A Modify keeps the client's vector and explain flag (hooks never see them).
        self.query = revalidate(RecallQuery, {**fields, "embedding": self.query.embedding,
                                              "explain": self.query.explain})

    async def execute(self, svc: Services, caller: Caller) -> RecallResult:
        query = self.query
        planning = asyncio.create_task(
            embedding.plan_query(svc.vectors, query.query, query.embedding))
        scope = store_recall.scope_of(query.namespace)
        async with searching(svc, planning, scope) as halves, svc.db.connection() as conn:
            hits = await halves.hits(conn, query.query, query.limit)
            records = await native_records.hidden(svc, conn, caller, {
                h.memory.id: h.memory.namespace for h in hits})
        plan = planning.result()  # awaited by hits()
        hits = [h for h in hits if h.memory.id not in records
                and visible(svc, caller, self.spec, h.memory.namespace)]
        searched = plan.vector is not None and plan.vector.search
        ranked = replace(apply_budget(hits, query.budget_tokens),
                         mode="hybrid" if searched else "fulltext", degraded=plan.degraded,
                         explain=query.explain)
        return bound_bytes(ranked, svc.limits.max_answer_bytes)

    def post_payload(self, event: EventName, result: RecallResult) -> dict[str, Any]:
        views = (list(result.views) if result.views is not None and not result.explain
                 else [hit_view(h) for h in result.hits])
        self._sent = (result, views)
        return payload_with(event, {"results": views}, **self._hooked(),
                            truncated=result.truncated)

    def post_answer(self, event: EventName, result: RecallResult,
                    answer: ChainOutcome) -> RecallResult:
        """The chain's order; when it kept recall's own and the answer shows no ``explain``,
        the views the hooks were sent become the answer's (made once per recall: ten views
        cost about 40 us, four times that on a vCPU just woken from a halt, docs/adr/0076).
        Nothing writes to them: an unmodified chain hands its payload back as it came."""
        ranked = reordered(result, answer)
        sent = self._sent
        if (sent is not None and sent[0] is result and not answer.modified
                and not result.explain):
            return replace(ranked, views=tuple(sent[1]))
        return ranked


@dataclass
class Halves:
    """A recall's two candidate lists, made at once (docs/adr/0080): the query embeds in a
    worker thread and its vector candidates are read on a second connection while the
    full-text candidates are read on the request's own; the last statement fuses them. A
    recall costs the longest of the three, not their sum."""

    svc: Services
    planning: asyncio.Task[embedding.QueryPlan]
    scope: store_recall.Scope
    nearing: asyncio.Task[store_recall.Candidates | None] | None = None

    def start(self) -> None:
        """Start reading the vector candidates as soon as the query's vector is there (a
        full-text recall has none to read)."""
        if embedding.searches(self.svc.vectors):
            self.nearing = asyncio.create_task(self._near())

    async def _near(self) -> store_recall.Candidates | None:
        vector = (await self.planning).vector
        if vector is None or not vector.search:
            return None
        async with self.svc.db.spare_connection() as conn:
            if conn is None:  # none idle: :func:`store_recall.fuse` reads them on its own
                return None
            return await store_recall.vector_candidates(conn, self.scope, vector)

    async def hits(self, conn: Conn, query: str, limit: int) -> list[Hit]:
        """The fused hits, best first: the full-text candidates on ``conn``, then the
        vector candidates and the query's plan awaited, then the fusion on ``conn``."""
        found = await store_recall.fulltext_candidates(
            conn, query=query, scope=self.scope, limit=limit, pool=self.svc.limits.recall_pool)
        plan = await self.planning
        near = await self.nearing if self.nearing is not None else None
        return await store_recall.fuse(conn, found, plan.vector, near)

    async def stop(self) -> None:
        """Both tasks ended: cancelled if the full-text half failed first (its error is
        the one the caller sees), their own errors read so they are not reported twice."""
        for task in (self.nearing, self.planning):
            if task is not None:
                await settled(task)


@asynccontextmanager
async def searching(svc: Services, planning: asyncio.Task[embedding.QueryPlan],
                    scope: store_recall.Scope) -> AsyncIterator[Halves]:
    """The :class:`Halves` of a recall whose query is being planned by ``planning``; both
    tasks are ended when the block is left, whatever happened in it."""
    halves = Halves(svc, planning, scope)
    try:
        halves.start()
        yield halves
    finally:
        await halves.stop()


async def settled(task: asyncio.Task[Any]) -> None:
    """``task`` ended: cancelled if still running, its own error read so it is not
    reported twice."""
    if not task.done():
        await tasks.stop([task], timeout_s=1.0)
    elif not task.cancelled():
        task.exception()


#: RecallQuery fields hooks never see (as on the hybrid branch before the pipeline).
_NOT_HOOKED: set[str] = {"embedding", "explain"}


async def recall(svc: Services, caller: Caller, query: RecallQuery) -> RecallResult:
    """Answer a recall query."""
    return await run(svc, caller, RecallCall(query))
