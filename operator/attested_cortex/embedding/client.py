"""Client vectors: the client sends ``embedding`` with each memory and query.

The server embeds nothing; it checks each vector against the configured dimension (a
mismatch is refused with 400 by the service) and records it under the configured model name.
"""

from __future__ import annotations

from collections.abc import Sequence

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError


class ClientVectors:
    """Vectors come with the request."""

    def __init__(self, model: str, dimension: int) -> None:
        self._info = EmbedderInfo("client", model, dimension)

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    @property
    def embeds(self) -> bool:
        return False

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        raise EmbeddingError("client vectors: the server does not embed text itself")

    async def aclose(self) -> None:
        return None
