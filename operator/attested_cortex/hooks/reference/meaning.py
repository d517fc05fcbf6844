"""Text and word vectors for the reference hooks that work by meaning (:mod:`.rerank`,
:mod:`.expand`): the embedded MiniLM model (all-MiniLM-L6-v2, int8 ONNX, docs/adr/0042) run
in the hook's own process, with a bounded cache of vectors by text, so a hit or a word seen
before costs nothing. Loaded once per process; no network, no PyTorch.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from attested_cortex.embedding import minilm

#: Texts per onnxruntime call: short texts (words, recall hits) pad little once sorted.
CALL_TEXTS: Final = 16


class Vectors:
    """MiniLM vectors by text, the last ``capacity`` kept (thread-safe)."""

    def __init__(self, *, capacity: int = 20_000, loaded: Any = None) -> None:
        self._loaded = loaded if loaded is not None else minilm.load()
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def of(self, texts: Sequence[str]) -> Any:
        """The L2-normalised vectors of ``texts`` (a float32 matrix, one row per text)."""
        import numpy as np

        with self._lock:
            missing = sorted({t for t in texts if t not in self._cache}, key=len)
        made = self.embed(missing)
        with self._lock:
            rows = [made[t] if t in made else self._cache.get(t) for t in texts]
            for text, row in made.items():
                self._cache[text] = row
            for text in texts:
                if text in self._cache:
                    self._cache.move_to_end(text)
            while len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        lost = [t for t, row in zip(texts, rows, strict=True) if row is None]
        if lost:  # evicted by another thread meanwhile: made again, not cached
            again = self.embed(lost)
            rows = [again[t] if row is None else row for t, row in zip(texts, rows, strict=True)]
        return np.array(rows, dtype=np.float32).reshape(len(texts), minilm.DIMENSION)

    def embed(self, texts: Sequence[str]) -> dict[str, Any]:
        """Vectors of ``texts`` (shortest first, :data:`CALL_TEXTS` per call), uncached."""
        ordered = sorted(set(texts), key=len)
        made: dict[str, Any] = {}
        for start in range(0, len(ordered), CALL_TEXTS):
            chunk = ordered[start:start + CALL_TEXTS]
            made.update(zip(chunk, minilm.embed_batch(self._loaded, chunk), strict=True))
        return made
