"""What every embedder offers, and the one exception family of this boundary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Source = Literal["default", "remote", "client"]


class EmbeddingError(Exception):
    """An embedder could not produce vectors (unreachable, too slow, malformed answer)."""


class EmbeddingRefusedError(EmbeddingError):
    """The embedder answered, but not with a usable vector for these texts: it refused them
    (an HTTP 4xx about the request, such as 413) or gave a vector that is not finite or is
    all zeros. Another text may well succeed: the backfill bisects the batch to find the
    text at fault instead of retrying the whole window forever."""


@dataclass(frozen=True)
class EmbedderInfo:
    """Which vectors an embedder makes: recorded with every vector it makes."""

    source: Source
    model: str
    dimension: int | None  # None until a remote endpoint has answered once

    def as_dict(self) -> dict[str, object]:
        """JSON form for capabilities."""
        return {"source": self.source, "model": self.model, "dimension": self.dimension}


class Embedder(Protocol):
    """Text in, one vector per text out, within ``timeout_s``."""

    @property
    def info(self) -> EmbedderInfo: ...

    @property
    def embeds(self) -> bool:
        """False for client vectors: the server never embeds text itself."""
        ...

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        """Vectors for ``texts`` in order; raises :class:`EmbeddingError`. ``background``:
        nobody waits for the answer, so keep the work off the event loop where it can."""
        ...

    async def aclose(self) -> None: ...


def chunked(texts: Sequence[str], *, max_texts: int, max_chars: int) -> list[Sequence[str]]:
    """``texts`` cut, in order, into calls of at most ``max_texts`` texts and ``max_chars``
    characters (a longer text alone): a model's time, and an endpoint's batch limits, grow
    with the text, so calls sized by count alone missed deadlines on long memories."""
    out: list[Sequence[str]] = []
    start = chars = 0
    for end, text in enumerate(texts):
        if end > start and (end - start >= max_texts or chars + len(text) > max_chars):
            out.append(texts[start:end])
            start, chars = end, 0
        chars += len(text)
    if start < len(texts):
        out.append(texts[start:])
    return out


@runtime_checkable
class PassageEmbedder(Protocol):
    """An embedder with a window: a longer text becomes several passages, one vector each
    (docs/adr/0096; the static model too since docs/adr/0136, its whole text first).
    Embedders without one (an endpoint, client vectors) give each text one vector:
    :func:`passages` treats them alike."""

    async def embed_passages(self, texts: Sequence[str], *, timeout_s: float,
                             background: bool = False) -> list[list[list[float]]]:
        """Each text's passage vectors in order, within ``timeout_s`` per model call."""
        ...


async def passages(embedder: Embedder, texts: Sequence[str], *, timeout_s: float,
                   background: bool = False) -> list[list[list[float]]]:
    """Each text's passage vectors: its passages' where the embedder has a window, else its
    one vector."""
    if isinstance(embedder, PassageEmbedder):
        return await embedder.embed_passages(texts, timeout_s=timeout_s, background=background)
    made = await embedder.embed(texts, timeout_s=timeout_s, background=background)
    return [[v] for v in made]
