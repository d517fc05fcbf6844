"""Which embedder ``--embedder`` (or ``embedder:`` in the settings file) names.

``default``: the embedded MiniLM model (:mod:`.default`); ``small``: the embedded wordllama
model (:mod:`.small`, smaller and faster, weaker on paraphrases: docs/adr/0042); ``none``: no
vectors, full-text recall only;
``client``: vectors sent by the client (``embedding.model`` and ``embedding.dimension`` say
which); an ``http(s)://`` URL: an OpenAI-compatible endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from attested_cortex.embedding.base import Embedder, EmbeddingError

#: The names ``--embedder`` takes besides an http(s) URL.
MODES: Final = ("default", "small", "none", "client")


def build_embedder(spec: str, *, model: str | None = None, dimension: int | None = None,
                   api_key_file: Path | None = None) -> Embedder | None:
    """The embedder ``spec`` names, or None for ``none``."""
    if spec == "none":
        return None
    if spec == "default":
        from attested_cortex.embedding.default import DefaultEmbedder

        return DefaultEmbedder()
    if spec == "small":
        from attested_cortex.embedding.small import SmallEmbedder

        return SmallEmbedder()
    if spec == "client":
        if not model or dimension is None:
            raise EmbeddingError(
                "--embedder client needs embedding.model and embedding.dimension in --config")
        from attested_cortex.embedding.client import ClientVectors

        return ClientVectors(model, dimension)
    if spec.startswith(("http://", "https://")):
        from attested_cortex.embedding.remote import RemoteEmbedder

        return RemoteEmbedder(spec, model=model, dimension=dimension, api_key_file=api_key_file)
    raise EmbeddingError(f"--embedder {spec!r}: use default, small, none, client or an "
                         "http(s) URL")
