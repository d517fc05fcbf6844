"""The embedded default: ``wordllama``'s static 256-dimension model (``l2_supercat``).

Its weights and tokenizer ship inside the PyPI wheel, so it loads with ``cache_dir`` set to the
package's own directory and ``disable_download=True``: it never reaches the network. Loading
takes about half a second (once per process: the model is shared by every server in it) and a
query embeds in well under a millisecond, so it runs on the event loop for a few texts and in
a worker thread for batches and for the write-behind embedder (``background``: the tokenizer
and numpy leave the lock to the loop meanwhile).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError

MODEL = "wordllama/l2_supercat"
DIMENSION = 256
#: Batches larger than this go to a worker thread instead of the event loop.
INLINE_TEXTS = 8


@functools.cache
def _load() -> Any:
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise EmbeddingError(f"the embedded default needs the wordllama package: {exc}") from exc
    return WordLlama.load(config="l2_supercat", dim=DIMENSION, disable_download=True,
                          cache_dir=Path(wordllama.__file__).parent)


class DefaultEmbedder:
    """The offline default embedder."""

    def __init__(self) -> None:
        self._model = _load()
        self._info = EmbedderInfo("default", MODEL, DIMENSION)

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    @property
    def embeds(self) -> bool:
        return True

    def embed_now(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, computed on the calling thread (L2-normalised)."""
        if not texts:
            return []
        array = self._model.embed(list(texts), norm=True)
        return [row.tolist() for row in array]

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        if len(texts) <= INLINE_TEXTS and not background:
            return self.embed_now(texts)
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for: see attested_cortex.tasks
                return await asyncio.to_thread(self.embed_now, texts)
        except TimeoutError as exc:
            raise EmbeddingError(f"embedding {len(texts)} texts took over {timeout_s}s") from exc

    async def aclose(self) -> None:
        return None
