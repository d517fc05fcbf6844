"""Reference hook: reranks recall's hits by meaning, blended with the fused score.

Event: ``post_recall``, daemon mode (``python -m attested_cortex.hooks.reference.rerank``;
docs/adr/0071). For each hit it takes the cosine of the query's and the hit's MiniLM vectors
(:mod:`.meaning`: the embedded all-MiniLM-L6-v2, run in this process, hits' vectors cached by
text) and scores ``RERANK_WEIGHT * cosine + (1 - RERANK_WEIGHT) * score / top score``; it
answers the hits in that order with those scores (a reorder: the server accepts ids and
scores only, docs/hooks.md). A cortex whose recall embeds with ``small`` (wordllama) gets
MiniLM's judgement of its top hits without re-embedding its memories; one embedding with
MiniLM gains less (the fusion already holds the same cosine). It reorders the hits recall
returned: ask for more (``limit``) to let it reach further.

Environment: ``RERANK_WEIGHT`` (default 0.7, chosen on the synthetic quality set: 0.3 and
0.7 were measured; 0 keeps the fused order), ``RERANK_CACHE`` (vectors kept, default 20000).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from attested_cortex.hooks.reference.meaning import Vectors
from attested_cortex.hooks.reference.serving import serve
from attested_cortex.hooks.wire import RawHookRequest

DEFAULT_WEIGHT: Final = 0.7


#: Characters of a hit read: MiniLM reads 128 word pieces, so a memory's first few hundred
#: words are all it sees, and tokenizing 256k characters to drop them would cost more.
MAX_CHARS: Final = 2000


def hit_text(hit: Mapping[str, Any]) -> str:
    """What a hit says: its title (when it has one) and the start of its content."""
    title, content = hit.get("title") or "", str(hit.get("content", ""))
    return (f"{title}. {content}" if title else content)[:MAX_CHARS]


def blended(cosines: Sequence[float], fused: Sequence[float], *, weight: float) -> list[float]:
    """Each hit's new score: the cosine and the fused score (scaled by the top one) mixed."""
    top = max(fused, default=0.0)
    return [weight * c + (1 - weight) * (f / top if top > 0 else 0.0)
            for c, f in zip(cosines, fused, strict=True)]


class Reranker:
    """Scores the hits of one ``post_recall`` payload."""

    def __init__(self, vectors: Vectors, *, weight: float = DEFAULT_WEIGHT) -> None:
        self.vectors, self.weight = vectors, weight

    def decide(self, request: RawHookRequest) -> dict[str, Any]:
        """A reorder of the hits, best first, or Allow when there is nothing to order."""
        hits = request["payload"].get("results", [])
        if len(hits) < 2 or self.weight <= 0:
            return {"decision": "allow"}
        matrix = self.vectors.of([str(request["payload"]["query"]), *map(hit_text, hits)])
        cosines = (matrix[1:] @ matrix[0]).tolist()
        scores = blended(cosines, [float(h["score"]) for h in hits], weight=self.weight)
        order = sorted(range(len(hits)), key=lambda i: -scores[i])
        results = [{"id": hits[i]["id"], "score": round(scores[i], 6)} for i in order]
        return {"decision": "modify", "delta": {"results": results}}


def main() -> None:
    """Serve on stdio."""
    reranker = Reranker(Vectors(capacity=int(os.environ.get("RERANK_CACHE", 20_000))),
                        weight=float(os.environ.get("RERANK_WEIGHT", DEFAULT_WEIGHT)))
    serve(reranker.decide)


if __name__ == "__main__":
    main()
