"""The embedded MiniLM (``--embedder minilm``, int8 ONNX) in process: its vectors are the
upstream model's, its files are the pinned ones, and batching changes no vector. No database.

The reference vectors come from the upstream fp32 weights run by an independent numpy BERT
(hack/embedding/provenance.py, docs/adr/0042).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attested_cortex.embedding import minilm, onnx
from attested_cortex.embedding.base import EmbeddingError
from attested_cortex.embedding.choosing import build_embedder

REFERENCE = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())["vectors"]


def test_vectors_are_the_upstream_models() -> None:
    embedder = minilm.MiniLMEmbedder()
    texts = list(REFERENCE)
    served = np.array(embedder.embed_now(texts))
    reference = np.array([REFERENCE[t] for t in texts])
    assert served.shape == (len(texts), minilm.DIMENSION)
    cosines = served @ reference.T
    assert np.diag(cosines).min() >= 0.99, np.diag(cosines)
    # each sentence is nearest its own reference: the check can tell models apart
    assert (cosines.argmax(axis=1) == np.arange(len(texts))).all()
    assert np.allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)


def test_batching_and_truncation_change_no_vector() -> None:
    embedder = minilm.MiniLMEmbedder()
    texts = ["short", "a much longer sentence about release trains and Friday freezes",
             "word " * 600, *[f"memory {i}" for i in range(11)]]
    together = np.array(embedder.embed_now(texts))
    alone = np.array([embedder.embed_now([t])[0] for t in texts[:3]])
    assert np.allclose(together[:3], alone, atol=1e-4)
    assert len(together) == len(texts) and embedder.embed_now([]) == []


def test_a_file_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    changed = tmp_path / "model.onnx"
    shutil.copyfile(minilm.onnx_path(), changed)
    with changed.open("r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(EmbeddingError, match="not the pinned"):
        minilm.MiniLMEmbedder(onnx=changed)


def test_modes_name_minilm_and_wordllama() -> None:
    chosen = build_embedder("minilm")
    assert chosen is not None and chosen.info.model == minilm.MODEL
    small = build_embedder("default")
    assert small is not None and small.info.as_dict() == {
        "source": "default", "model": "wordllama/l2_supercat", "dimension": 256}
    with pytest.raises(EmbeddingError, match="use minilm, static, default, onnx, none, client"):
        build_embedder("large")


async def test_a_long_text_is_embedded_in_overlapping_passages() -> None:
    embedder = minilm.MiniLMEmbedder()
    long_text = " ".join(f"sentence {i} about the release train." for i in range(200))
    windows = embedder.split([long_text])[0]
    assert len(windows) > 10 and all(len(w.ids) <= minilm.MAX_TOKENS for w in windows)
    # every onnxruntime call holds at most CALL_TOKENS word pieces once padded
    assert all(len(call) * max(len(windows[i].ids) for i in call) <= onnx.CALL_TOKENS
               for call in onnx.calls(windows))
    short, long_ = await embedder.embed_passages(["Deploys freeze on Fridays", long_text],
                                                 timeout_s=5)
    assert len(short) == 1 and len(long_) == len(windows)
    # a short text's one passage, and a long one's first, are the vector it always had
    first = np.array(embedder.embed_now(["Deploys freeze on Fridays", long_text]))
    assert np.allclose(first, np.array([short[0], long_[0]]), atol=1e-5)
