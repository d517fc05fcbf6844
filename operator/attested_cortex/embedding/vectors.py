"""What makes a vector usable: finite and not all zeros. Pure; called by every embedder's
caller on the write path (the backfill, the write-behind and the inline write) and by the
remote embedder on each answer, so a NaN, an infinity or a zero vector from an endpoint is
never stored (cosine distance over them is undefined: such a memory would never be found, or
would break the ordering of every search it takes part in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attested_cortex.embedding.base import EmbeddingRefusedError


def vector_problem(vector: Sequence[float]) -> str | None:
    """Why ``vector`` cannot be stored, or None when it can."""
    if not all(math.isfinite(x) for x in vector):
        return "is not finite (NaN or infinity)"
    if not any(vector):
        return "is all zeros (no direction to compare)"
    return None


def check_vectors(vectors: Sequence[Sequence[float]]) -> None:
    """:class:`EmbeddingRefusedError` naming the first unusable vector, if any."""
    for index, vector in enumerate(vectors):
        problem = vector_problem(vector)
        if problem is not None:
            raise EmbeddingRefusedError(f"the embedder's vector {index} {problem}")
