"""The one Modify a post- event accepts: reordering (and dropping) the hits of a recall.

A ``post_recall`` hook may answer ``{"decision": "modify", "delta": {"results": [...]}}``
with the hits it wants returned, in the order it wants them (a reranker; docs/adr/0071).
:func:`screen` (called by :mod:`.firing` before the answer is folded) holds it to the safety
rule: each entry names a hit by ``id`` that was among the results it was shown, at most
once; it may carry a new ``score`` (a finite number); any other field it carries must equal
the hit's own. So a hook can reorder and drop, never add a memory nor change one. A breach
is a ``refused`` hook failure (its fail mode applies; under ``open``, the default, the fused
order stands). An accepted answer is turned into a delta holding the full hits, so later
hooks of the chain see whole hits, as they would have without it. Pure: no I/O.

:func:`note` says what the chain did to the order, for recall's ``explain``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from attested_cortex.hooks.decisions import Modify

#: Post- events whose Modify may reorder and drop ``results`` (every other post- Modify is
#: ignored with a warning).
REORDERING_EVENTS: Final = frozenset({"post_recall"})
#: The one field of a hit an answer may change.
RESCORED: Final = "score"


class UnsafeReorderError(ValueError):
    """A hook's reorder broke the safety rule; the message says how."""


def reorders(event: str) -> bool:
    """Whether a Modify on ``event`` is a reorder of its ``results``."""
    return event in REORDERING_EVENTS


def screen(payload: Mapping[str, Any], decision: Modify) -> Modify:
    """The Modify with its ``results`` resolved to the shown hits, or raise
    :class:`UnsafeReorderError`."""
    if set(decision.delta) != {"results"}:
        raise UnsafeReorderError(
            f"a reorder's delta holds only 'results'; got {sorted(decision.delta)}")
    wanted = decision.delta["results"]
    if not isinstance(wanted, list):
        raise UnsafeReorderError("'results' must be a list of hits")
    shown = {str(hit.get("id")): hit for hit in payload.get("results", ())
             if isinstance(hit, Mapping)}
    taken: set[str] = set()
    return Modify(delta={"results": [_resolved(entry, shown, taken) for entry in wanted]})


def _resolved(entry: object, shown: Mapping[str, Mapping[str, Any]], taken: set[str]
              ) -> dict[str, Any]:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
        raise UnsafeReorderError("each result must be an object with a string 'id'")
    hit_id = entry["id"]
    hit = shown.get(hit_id)
    if hit is None:
        raise UnsafeReorderError(f"result {hit_id!r} was not among the hits")
    if hit_id in taken:
        raise UnsafeReorderError(f"result {hit_id!r} appears twice")
    taken.add(hit_id)
    changed = sorted(k for k, v in entry.items()
                     if k not in ("id", RESCORED) and (k not in hit or hit[k] != v))
    if changed:
        raise UnsafeReorderError(f"result {hit_id!r}: {changed} differ from the hit's")
    score = entry.get(RESCORED, hit.get(RESCORED))
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise UnsafeReorderError(f"result {hit_id!r}: 'score' must be a finite number")
    return {**hit, RESCORED: float(score)}


def note(records: Sequence[Any]) -> str | None:
    """What the chain's hooks did to the order (``records``: :class:`.chaining.HookRecord`):
    ``reranked by <hook>``, ``rerank: timed out (<hook>)``, ``rerank: hook error (<hook>:
    <cause>)``, joined by ``; ``; ``rerank: fused order kept`` when hooks ran and none
    reordered; None when no hook ran."""
    if not records:
        return None
    parts = [f"reranked by {r.name}" for r in records if r.effect == "modify"]
    for record in records:
        if record.failure == "timeout":
            parts.append(f"rerank: timed out ({record.name})")
        elif record.failure is not None:
            parts.append(f"rerank: hook error ({record.name}: {record.failure})")
    return "; ".join(parts) or "rerank: fused order kept"
