"""What the two embedded models share: vectors computed in this process, on the calling
thread (:meth:`LocalEmbedder.embed_now`) or in a worker thread with a deadline.

Subclassed by :mod:`.minilm` (MiniLM, ONNX) and :mod:`.default` (wordllama). Their runtimes
(onnxruntime, the tokenizers package, numpy) leave the GIL while they compute, so a worker
thread keeps the event loop free for requests meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError


class LocalEmbedder:
    """An embedded model: ``inline_texts`` or fewer texts are embedded on the event loop
    (cheaper than the hop to a thread when a text costs microseconds), more in a thread,
    ``call_texts`` at a time, each such call within the deadline (``embedding.timeout_ms``
    is "one embedding call": a backfill batch of long memories is several)."""

    inline_texts = 0
    call_texts = 1024

    def __init__(self, info: EmbedderInfo) -> None:
        self._info = info

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    @property
    def embeds(self) -> bool:
        return True

    def embed_now(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for ``texts``, computed on the calling thread (L2-normalised)."""
        raise NotImplementedError

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        if len(texts) <= self.inline_texts and not background:
            return self.embed_now(texts)
        out: list[list[float]] = []
        for start in range(0, len(texts), self.call_texts):
            chunk = texts[start:start + self.call_texts]
            try:
                async with asyncio.timeout(timeout_s):  # not wait_for: see attested_cortex.tasks
                    out += await asyncio.to_thread(self.embed_now, chunk)
            except TimeoutError as exc:
                raise EmbeddingError(
                    f"embedding {len(chunk)} texts took over {timeout_s}s") from exc
        return out

    async def aclose(self) -> None:
        return None
