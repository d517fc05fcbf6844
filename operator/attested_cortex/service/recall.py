"""The recall pipeline: pre_recall hook -> query vector (hybrid mode: embedded within its
deadline, or sent by the client) -> bounded full-text + vector recall, fused -> token budget
-> post_recall hook. Called by ``POST /v1/recall``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from attested_cortex.service import embedding, hooking
from attested_cortex.service.commands import RecallQuery
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.views import memory_view
from attested_cortex.store import recall as store_recall
from attested_cortex.store.recall import Hit


@dataclass(frozen=True)
class RecallResult:
    """Ranked hits and whether the token budget cut any of them."""

    hits: tuple[Hit, ...]
    truncated: bool
    tokens: int
    mode: str = "fulltext"
    degraded: str | None = None
    explain: bool = False


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


def hit_view(hit: Hit, *, explain: bool = False) -> dict[str, Any]:
    """A hit as API JSON: ``embedded`` (hybrid mode) says whether it has a current vector."""
    view = {**memory_view(hit.memory), "score": round(hit.score, 6)}
    if hit.embedded is not None:
        view["embedded"] = hit.embedded
    if explain and hit.parts is not None:
        view["explain"] = hit.parts.as_dict()
    return view


def result_view(result: RecallResult) -> dict[str, Any]:
    """The ``POST /v1/recall`` answer."""
    body: dict[str, Any] = {
        "results": [hit_view(h, explain=result.explain) for h in result.hits],
        "truncated": result.truncated,
        "tokens": result.tokens,
        "mode": result.mode,
    }
    if result.degraded is not None:
        body["degraded"] = result.degraded
    return body


async def recall(svc: Services, caller: Caller, query: RecallQuery) -> RecallResult:
    """Answer a recall query."""
    vector = query.embedding
    payload = await hooking.before(
        svc, caller, "pre_recall", query.model_dump(exclude={"embedding", "explain"}),
        namespace=query.namespace,
    )
    payload = {**payload, "explain": query.explain, "embedding": vector}
    query = hooking.revalidate(RecallQuery, payload)
    embedding.check_vector(svc.vectors, query.embedding)
    plan = await embedding.plan_query(svc.vectors, query.query, query.embedding)
    async with svc.db.connection() as conn:
        hits = await store_recall.recall(
            conn, query=query.query, namespace=query.namespace, limit=query.limit,
            pool=svc.limits.recall_pool, vector=plan.vector,
        )
    searched = plan.vector is not None and plan.vector.search
    result = replace(apply_budget(hits, query.budget_tokens),
                     mode="hybrid" if searched else "fulltext", degraded=plan.degraded,
                     explain=query.explain)
    await hooking.after(
        svc, caller, "post_recall",
        {"query": query.model_dump(exclude={"embedding", "explain"}),
         "results": [hit_view(h) for h in result.hits],
         "truncated": result.truncated},
        namespace=query.namespace,
    )
    return result
