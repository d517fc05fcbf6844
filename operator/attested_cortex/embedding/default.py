"""The embedded default: ``wordllama``'s static 256-dimension model (``l2_supercat``). MiniLM
(:mod:`.minilm`, the ``minilm`` choice) recalls paraphrases better at a higher cost; it becomes
the default once its latency and throughput goals are met (docs/adr/0042).

Its weights and tokenizer ship inside the PyPI wheel, so it loads with ``cache_dir`` set to the
package's own directory and ``disable_download=True``: it never reaches the network. Loading
takes about half a second (once per process: the model is shared by every server in it) and a
query embeds in well under a millisecond, so it runs on the event loop for a few texts and in
a worker thread for batches and for the write-behind embedder (``background``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError
from attested_cortex.embedding.local import LocalEmbedder

MODEL = "wordllama/l2_supercat"
DIMENSION = 256


@functools.cache
def _load() -> Any:
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise EmbeddingError(f"the default embedder needs the wordllama package: {exc}") from exc
    return WordLlama.load(config="l2_supercat", dim=DIMENSION, disable_download=True,
                          cache_dir=Path(wordllama.__file__).parent)


class DefaultEmbedder(LocalEmbedder):
    """The default offline embedder (static word vectors)."""

    #: Batches larger than this go to a worker thread instead of the event loop.
    inline_texts = 8
    #: Characters per call: 64 texts of 14 KB (long agent sessions) took 0.74 s in one call
    #: on an idle machine and 2.6 s on a loaded one, past the 1 s deadline; 32 KB take
    #: about 25 ms.
    call_chars = 32 * 1024

    def __init__(self) -> None:
        super().__init__(EmbedderInfo("default", MODEL, DIMENSION))
        self._model = _load()

    def embed_now(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        array = self._model.embed(list(texts), norm=True)
        return [row.tolist() for row in array]
