"""What the two embedded models share: vectors computed in this process, on the calling
thread (:meth:`LocalEmbedder.embed_now`) or in a worker thread with a deadline.

Subclassed by :mod:`.minilm` (MiniLM, ONNX) and :mod:`.default` (wordllama). Their runtimes
(onnxruntime, the tokenizers package, numpy) leave the GIL while they compute, so a worker
thread keeps the event loop free for requests meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError, chunked

T = TypeVar("T")


class LocalEmbedder:
    """An embedded model: ``inline_texts`` or fewer texts are embedded on the event loop
    (cheaper than the hop to a thread when a text costs microseconds), more in a thread,
    each call within the deadline (``embedding.timeout_ms`` is "one embedding call": a
    backfill batch of long memories is several). A call holds at most ``call_texts`` texts
    and ``call_chars`` characters (one longer text alone): a model's time grows with the
    text it reads, so calls sized by count alone missed the deadline on long memories."""

    inline_texts = 0
    call_texts = 1024
    call_chars = 1 << 30

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

    def calls(self, texts: Sequence[str]) -> list[Sequence[str]]:
        """``texts`` cut, in order, into calls of at most ``call_texts`` texts and
        ``call_chars`` characters."""
        return chunked(texts, max_texts=self.call_texts, max_chars=self.call_chars)

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        if len(texts) <= self.inline_texts and not background:
            return self.embed_now(texts)
        out: list[list[float]] = []
        for chunk in self.calls(texts):
            out += await in_thread(self.embed_now, chunk, timeout_s=timeout_s,
                                   background=background, what=f"{len(chunk)} texts")
        return out

    async def aclose(self) -> None:
        return None


async def in_thread(work: Callable[..., T], *args: Any, timeout_s: float, background: bool,
                    what: str) -> T:
    """``work(*args)`` in a worker thread; within ``timeout_s`` unless ``background``.

    A call in the background (the write-behind embedder, the backfill) has no deadline:
    nobody waits for it, a call here is bounded by its size (``call_texts``, ``call_chars``,
    the ONNX embedder's word pieces) and cannot hang on a network, and a thread cannot be
    cancelled anyway: a late call only threw away the vectors it went on to make (long
    memories missed their deadline on a loaded machine and waited for the backfill)."""
    if background:
        return await asyncio.to_thread(work, *args)
    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: see attested_cortex.tasks
            return await asyncio.to_thread(work, *args)
    except TimeoutError as exc:
        raise EmbeddingError(f"embedding {what} took over {timeout_s}s") from exc
