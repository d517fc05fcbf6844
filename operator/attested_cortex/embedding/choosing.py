"""Which embedder ``--embedder`` (or ``embedder:`` in the settings file) names.

``minilm`` (the default, docs/adr/0097): the embedded all-MiniLM-L6-v2 (:mod:`.minilm`,
docs/adr/0042); ``static`` (or ``default``, its name before MiniLM became the default): the
embedded wordllama model (:mod:`.default`, fast to write, weaker on paraphrases); ``onnx``: a
model of the user's own (:mod:`.onnx`, docs/adr/0098); ``none``: no vectors, full-text recall
only;
``client``: vectors sent by the client (``embedding.model`` and ``embedding.dimension`` say
which); an ``http(s)://`` URL: an OpenAI-compatible endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from attested_cortex.embedding.base import Embedder, EmbeddingError

if TYPE_CHECKING:
    from attested_cortex.embedding.onnx import OnnxModel

#: The names ``--embedder`` takes besides an http(s) URL.
MODES: Final = ("minilm", "static", "default", "onnx", "none", "client")


def build_embedder(spec: str, *, model: str | None = None, dimension: int | None = None,
                   api_key_file: Path | None = None,
                   onnx: OnnxModel | None = None) -> Embedder | None:
    """The embedder ``spec`` names, or None for ``none``."""
    if spec == "none":
        return None
    if spec in ("static", "default"):
        from attested_cortex.embedding.default import DefaultEmbedder

        return DefaultEmbedder()
    if spec == "minilm":
        from attested_cortex.embedding.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if spec == "onnx":
        if onnx is None:
            raise EmbeddingError("--embedder onnx needs embedding.onnx in --config: the "
                                 "directory of model.onnx and tokenizer.json and their SHA-256")
        from attested_cortex.embedding.onnx import OnnxEmbedder

        return OnnxEmbedder(onnx)
    if spec == "client":
        if not model or dimension is None:
            raise EmbeddingError(
                "--embedder client needs embedding.model and embedding.dimension in --config")
        from attested_cortex.embedding.client import ClientVectors

        return ClientVectors(model, dimension)
    if spec.startswith(("http://", "https://")):
        from attested_cortex.embedding.remote import RemoteEmbedder

        return RemoteEmbedder(spec, model=model, dimension=dimension, api_key_file=api_key_file)
    raise EmbeddingError(f"--embedder {spec!r}: use minilm, static, default, onnx, none, client "
                         "or an http(s) URL")
