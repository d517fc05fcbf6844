"""The embedded default: ``wordllama``'s static 256-dimension model (``l2_supercat``). MiniLM
(:mod:`.minilm`, the ``minilm`` choice) recalls paraphrases better at a higher cost; it becomes
the default once its latency and throughput goals are met (docs/adr/0042).

Its weights and tokenizer ship inside the PyPI wheel, so it loads with ``cache_dir`` set to the
package's own directory and ``disable_download=True``: it never reaches the network. Loading
takes about half a second (once per process: the model is shared by every server in it) and a
query embeds in well under a millisecond, so it runs on the event loop for a few texts and in
a worker thread for batches and for the write-behind embedder (``background``).

A static vector is the mean of the text's token vectors: a 14 KB session's is the mean of
everything said in it, and a question about one exchange of it is far from that mean. A text
longer than :data:`WINDOW` tokens is therefore stored as passages (docs/adr/0136, as MiniLM's
are, docs/adr/0096): passage 0 is the whole text's mean (the one vector every memory had
before, so existing vectors stay current), then each window of :data:`WINDOW` tokens
overlapping by :data:`OVERLAP`; recall scores a memory by its best passage.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError
from attested_cortex.embedding.local import LocalEmbedder, in_thread

MODEL = "wordllama/l2_supercat"
DIMENSION = 256
#: Tokens per passage of a long text: MiniLM's window (docs/adr/0096), a few sentences, so
#: that one exchange of a long conversation weighs in its own passage (docs/adr/0136).
WINDOW = 128
#: Tokens two consecutive passages share (a sentence cut by one window is whole in the next).
OVERLAP = 32


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

    def windows(self, text: str) -> list[Any]:
        """The token ids of ``text``'s windows past its whole (none for a text of at most
        :data:`WINDOW` tokens), as the model's own tokenizer cuts it."""
        import numpy as np

        ids = self._model.tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) <= WINDOW:
            return []
        step = WINDOW - OVERLAP
        return [np.asarray(ids[start:start + WINDOW], dtype=np.int64)
                for start in range(0, len(ids) - OVERLAP, step)]

    def passages_now(self, texts: Sequence[str]) -> list[list[list[float]]]:
        """Each text's passage vectors on the calling thread: its whole text's (exactly
        :meth:`embed_now`'s), then each window's, the mean of the window's token vectors
        normalised, which is what the model makes of the window's text (one tokenization
        of the text, no window padded to a whole session's length)."""
        import numpy as np

        table = self._model.embedding
        out: list[list[list[float]]] = []
        for text, whole in zip(texts, self.embed_now(texts), strict=True):
            vectors = [whole]
            for ids in self.windows(text):
                mean = table[np.clip(ids, 0, table.shape[0] - 1)].mean(axis=0)
                norm = float(np.linalg.norm(mean))
                if norm > 0:
                    vectors.append((mean / norm).tolist())
            out.append(vectors)
        return out

    async def embed_passages(self, texts: Sequence[str], *, timeout_s: float,
                             background: bool = False) -> list[list[list[float]]]:
        """Each text's passage vectors (:meth:`passages_now`), in worker threads, calls
        sized by ``call_chars`` as :meth:`embed`'s are."""
        out: list[list[list[float]]] = []
        for chunk in self.calls(texts):
            out += await in_thread(self.passages_now, chunk, timeout_s=timeout_s,
                                   background=background, what=f"{len(chunk)} texts")
        return out
