"""A sentence embedder from ONNX files: ``model.onnx`` run by onnxruntime, ``tokenizer.json``
read by the ``tokenizers`` package, pooled and normalised as its settings say (docs/adr/0098).

Used by :mod:`.minilm` (the embedded all-MiniLM-L6-v2, the default) and by ``--embedder onnx``
(a model of the user's own, from a volume or an image: bge-small, e5, an mpnet export). Both
files are pinned by SHA-256 and checked when the model loads (:func:`verified`): another file,
whatever its origin, stops the server with a message instead of filling the database with
another model's vectors under this model's name. Nothing is downloaded.

A text longer than the model's window (``max_tokens`` word pieces) is embedded in passages
(docs/adr/0096): windows of ``max_tokens`` pieces overlapping by ``overlap``, made by the
tokenizer itself (its overflowing encodings), one vector each; recall scores a memory by its
best passage. A query is embedded from its first window only. onnxruntime is called with at
most :data:`CALL_TOKENS` word pieces at a time, however many texts or passages a batch holds,
so each call's time is bounded by design and a long memory is several calls; in the
background (write-behind, backfill) no call races a deadline (:func:`.local.in_thread`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from attested_cortex.embedding.base import EmbedderInfo, EmbeddingError
from attested_cortex.embedding.local import LocalEmbedder, in_thread

Pooling = Literal["mean", "cls"]

#: Word pieces per onnxruntime call (windows of one call padded to its longest): 8 windows of
#: 128 took about 25 ms on one idle core here, so a call stays far inside any
#: ``embedding.timeout_ms`` even on a machine loaded several times over.
CALL_TOKENS: Final = 1024
#: onnxruntime's intra-op threads: one core, so a recall burst cannot starve PostgreSQL.
THREADS: Final = 1


@dataclass(frozen=True)
class OnnxModel:
    """Where a sentence embedder's files are, what they must hash to and how its token
    vectors become one sentence vector."""

    name: str
    onnx: Path
    tokenizer: Path
    onnx_sha256: str
    tokenizer_sha256: str
    pooling: Pooling = "mean"
    normalize: bool = True
    #: The model's window in word pieces; longer texts are embedded in passages.
    max_tokens: int = 128
    #: Word pieces two consecutive passages share (a sentence cut by one window is whole in
    #: the next).
    overlap: int = 32

    def __post_init__(self) -> None:
        if not 0 <= self.overlap < self.max_tokens // 2:
            raise EmbeddingError(f"model {self.name}: overlap must be below half of "
                                 f"max_tokens ({self.max_tokens})")


@dataclass(frozen=True)
class Loaded:
    """The tokenizer and the ONNX session, loaded once per process."""

    tokenizer: Any
    session: Any
    inputs: frozenset[str]
    dimension: int


def verified(path: Path, sha256: str, *, name: str) -> bytes:
    """The file's bytes, if they are the pinned ones."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"the embedder {name} cannot read {path}: {exc}") from exc
    got = hashlib.sha256(data).hexdigest()
    if got != sha256.lower():
        raise EmbeddingError(
            f"{path} has SHA-256 {got}, not the pinned {sha256}: vectors of another model "
            f"would be stored as {name} (restore the file or pin the new one)")
    return data


@functools.cache
def load(model: OnnxModel) -> Loaded:
    """The verified tokenizer and ONNX session of ``model`` (once per process)."""
    import onnxruntime
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_str(
            verified(model.tokenizer, model.tokenizer_sha256, name=model.name).decode())
    except (ValueError, UnicodeDecodeError) as exc:  # pinned, yet not a tokenizer.json
        raise EmbeddingError(f"{model.tokenizer} is not a tokenizer.json: {exc}") from exc
    tok.enable_truncation(max_length=model.max_tokens, stride=model.overlap)
    tok.no_padding()  # padded per call below, to the call's longest window
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # its own warnings would reach stderr, not our logs
    # Without the arena each call frees its buffers: texts of every length would otherwise
    # leave the arena at the largest batch's size for good.
    options.enable_cpu_mem_arena = False
    data = verified(model.onnx, model.onnx_sha256, name=model.name)
    try:
        session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors for a bad graph
        raise EmbeddingError(f"{model.onnx} does not load as an ONNX model: {exc}") from exc
    inputs = frozenset(i.name for i in session.get_inputs())
    if not {"input_ids", "attention_mask"} <= inputs:
        raise EmbeddingError(f"{model.onnx} takes {sorted(inputs)}: a sentence embedder takes "
                             "input_ids and attention_mask")
    loaded = Loaded(tok, session, inputs, 0)
    (probe,) = run(loaded, model, [tok.encode("dimension probe")])
    return Loaded(tok, session, inputs, len(probe))


def run(loaded: Loaded, model: OnnxModel, windows: Sequence[Any]) -> Any:
    """One onnxruntime call over tokenizer encodings: pooled (and normalised) vectors."""
    import numpy as np

    width = max(len(w.ids) for w in windows)
    ids = np.zeros((len(windows), width), dtype=np.int64)
    mask = np.zeros((len(windows), width), dtype=np.int64)
    for row, w in enumerate(windows):
        ids[row, :len(w.ids)] = w.ids
        mask[row, :len(w.ids)] = w.attention_mask
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in loaded.inputs:
        feed["token_type_ids"] = np.zeros_like(ids)
    hidden = loaded.session.run(None, feed)[0]
    if hidden.ndim == 2:  # the graph pools itself
        pooled = hidden
    elif model.pooling == "cls":
        pooled = hidden[:, 0, :]
    else:
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    if not model.normalize:
        return pooled
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.maximum(norms, 1e-12)


def calls(windows: Sequence[Any]) -> list[list[int]]:
    """The windows' indices cut into onnxruntime calls of at most :data:`CALL_TOKENS` word
    pieces once padded (sorted by length, so padding stays short)."""
    order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = len(windows[i].ids)  # the longest so far: sorted ascending
        if current and (len(current) + 1) * width > CALL_TOKENS:
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def regroup(split: Sequence[Sequence[Any]], flat: list[list[float]]) -> list[list[list[float]]]:
    """``flat`` (one vector per window, in order) cut back into each text's passages."""
    out, at = [], 0
    for windows in split:
        out.append(flat[at:at + len(windows)])
        at += len(windows)
    return out


class OnnxEmbedder(LocalEmbedder):
    """An ONNX sentence embedder run in this process."""

    #: Texts per :meth:`embed` call (a query's, or a client's of ``embed``): each is one
    #: window of at most ``max_tokens`` pieces, so a call holds :data:`CALL_TOKENS` at most.
    call_texts = CALL_TOKENS // 128

    def __init__(self, model: OnnxModel) -> None:
        self._model = model
        self._loaded = load(model)
        super().__init__(EmbedderInfo("default", model.name, self._loaded.dimension))

    def _embed_windows(self, windows: Sequence[Any]) -> list[list[float]]:
        out: list[list[float]] = [[] for _ in windows]
        for call in calls(windows):
            made = run(self._loaded, self._model, [windows[i] for i in call])
            for i, row in zip(call, made, strict=True):
                out[i] = row.tolist()
        return out

    def embed_now(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, from its first window (a query, a client of ``embed``)."""
        if not texts:
            return []
        return self._embed_windows(self._loaded.tokenizer.encode_batch(list(texts)))

    def split(self, texts: Sequence[str]) -> list[list[Any]]:
        """Each text's windows (its first encoding and the overflowing ones)."""
        return [[e, *e.overflowing] for e in self._loaded.tokenizer.encode_batch(list(texts))]

    async def embed_passages(self, texts: Sequence[str], *, timeout_s: float,
                             background: bool = False) -> list[list[list[float]]]:
        """Each text's passage vectors, in worker threads, one onnxruntime call of at most
        :data:`CALL_TOKENS` pieces at a time, each within ``timeout_s`` unless
        ``background`` (:func:`.local.in_thread`): a long memory is more calls, never a late
        one."""
        split = await asyncio.to_thread(self.split, texts)
        windows = [w for ws in split for w in ws]
        flat: list[list[float]] = [[] for _ in windows]
        for call in calls(windows):
            made = await in_thread(run, self._loaded, self._model, [windows[i] for i in call],
                                   timeout_s=timeout_s, background=background,
                                   what=f"{len(call)} passages")
            for i, row in zip(call, made, strict=True):
                flat[i] = row.tolist()
        return regroup(split, flat)
