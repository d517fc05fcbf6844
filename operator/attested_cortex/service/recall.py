"""Recall: bounded full-text recall -> read isolation -> token budget, run through the
operation pipeline (:mod:`.pipeline`). Called by ``POST /v1/recall``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.service import operations as ops
from attested_cortex.service.commands import RecallQuery
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.hooking import revalidate
from attested_cortex.service.pipeline import Call, Target, run, visible
from attested_cortex.service.views import memory_view
from attested_cortex.store import recall as store_recall
from attested_cortex.store.recall import Hit


@dataclass(frozen=True)
class RecallResult:
    """Ranked hits and whether the token budget cut any of them."""

    hits: tuple[Hit, ...]
    truncated: bool
    tokens: int


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


def hit_view(hit: Hit) -> dict[str, Any]:
    """A hit as API JSON."""
    return {**memory_view(hit.memory), "score": round(hit.score, 6)}


@dataclass
class RecallCall(Call[RecallResult]):
    """``POST /v1/recall``: hits from namespaces the caller may not read are dropped before
    the budget is applied, so a recall never returns them."""

    spec = ops.RECALL
    query: RecallQuery

    async def target(self, svc: Services, caller: Caller) -> Target:
        ns = self.query.namespace
        return Target((ns,) if ns is not None else ())

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, **self.query.model_dump())

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        self.query = revalidate(RecallQuery, {k: v for k, v in changed.items()
                                              if k in RecallQuery.model_fields})

    async def execute(self, svc: Services, caller: Caller) -> RecallResult:
        query = self.query
        async with svc.db.connection() as conn:
            hits = await store_recall.recall(
                conn, query=query.query, namespace=query.namespace, limit=query.limit,
                pool=svc.limits.recall_pool,
            )
        hits = [h for h in hits if visible(svc, caller, self.spec, h.memory.namespace)]
        return apply_budget(hits, query.budget_tokens)

    def post_payload(self, event: EventName, result: RecallResult) -> dict[str, Any]:
        return payload(event, **self.query.model_dump(),
                       results=[hit_view(h) for h in result.hits], truncated=result.truncated)


async def recall(svc: Services, caller: Caller, query: RecallQuery) -> RecallResult:
    """Answer a recall query."""
    return await run(svc, caller, RecallCall(query))
