"""Which embedder ``--embedder`` (or ``embedder:`` in the settings file) names.

``default``: the embedded wordllama model (:mod:`.default`); ``minilm``: the embedded
all-MiniLM-L6-v2 (:mod:`.minilm`, better on paraphrases, slower: docs/adr/0042); ``none``: no
vectors, full-text recall only;
``client``: vectors sent by the client (``embedding.model`` and ``embedding.dimension`` say
which); an ``http(s)://`` URL: an OpenAI-compatible endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from attested_cortex.embedding.base import Embedder, EmbeddingError

#: The names ``--embedder`` takes besides an http(s) URL.
MODES: Final = ("default", "minilm", "none", "client")


def build_embedder(spec: str, *, model: str | None = None, dimension: int | None = None,
                   api_key_file: Path | None = None) -> Embedder | None:
    """The embedder ``spec`` names, or None for ``none``."""
    if spec == "none":
        return None
    if spec == "default":
        from attested_cortex.embedding.default import DefaultEmbedder

        return DefaultEmbedder()
    if spec == "minilm":
        from attested_cortex.embedding.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if spec == "client":
        if not model or dimension is None:
            raise EmbeddingError(
                "--embedder client needs embedding.model and embedding.dimension in --config")
        from attested_cortex.embedding.client import ClientVectors

        return ClientVectors(model, dimension)
    if spec.startswith(("http://", "https://")):
        from attested_cortex.embedding.remote import RemoteEmbedder

        return RemoteEmbedder(spec, model=model, dimension=dimension, api_key_file=api_key_file)
    raise EmbeddingError(f"--embedder {spec!r}: use default, minilm, none, client or an "
                         "http(s) URL")
