"""A model of the user's own (``embedder: onnx``, docs/adr/0098): MiniLM's files laid out in a
directory as a platform team would lay out bge-small or an mpnet export, pinned by SHA-256,
served offline over HTTP on PostgreSQL 17 + pgvector."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attested_cortex.embedding import minilm
from attested_cortex.errors import InvalidInputError
from tests.support.cortex import MakeCortex
from tests.support.postgres import Database


def laid_out(tmp_path: Path) -> dict[str, Any]:
    """MiniLM's two files in a directory of their own and the ``embedding`` settings."""
    folder = tmp_path / "models" / "minilm"
    folder.mkdir(parents=True)
    shutil.copyfile(minilm.onnx_path(), folder / "model.onnx")
    shutil.copyfile(minilm.TOKENIZER, folder / "tokenizer.json")
    digest = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
              for name in ("model.onnx", "tokenizer.json")}
    return {"model": "team/minilm", "onnx": {
        "dir": str(folder), "model_sha256": digest["model.onnx"],
        "tokenizer_sha256": digest["tokenizer.json"], "pooling": "mean"}}


async def test_a_model_of_ones_own_serves_hybrid_recall(age_database: Database,
                                                        make_cortex: MakeCortex,
                                                        tmp_path: Path) -> None:
    cortex = await make_cortex(age_database.dsn, embedder="onnx", embedding=laid_out(tmp_path))
    target = await cortex.store("kb", "Deploys freeze on Fridays after 3pm")
    await cortex.store("kb", "The cafeteria serves lunch at noon")
    await cortex.embedded_behind()
    reply = await cortex.call("POST", "/v1/recall",
                              {"query": "when do we stop shipping?", "explain": True})
    assert reply.status == 200, reply.text
    first = reply.body["results"][0]
    assert reply.body["mode"] == "hybrid" and first["id"] == target["id"]
    caps = (await cortex.call("GET", "/v1/capabilities")).body["recall"]
    assert caps["embedder"] == {"source": "default", "model": "team/minilm",
                                "dimension": minilm.DIMENSION}
    # the same vectors as the embedded MiniLM: the loader pools and normalises as told
    ours = minilm.MiniLMEmbedder().embed_now(["when do we stop shipping?",
                                              "Deploys freeze on Fridays after 3pm"])
    similarity = float(np.dot(ours[0], ours[1]))
    assert first["explain"]["vector"]["similarity"] == pytest.approx(similarity, abs=1e-4)


async def test_a_file_other_than_the_pinned_one_stops_start_up(age_database: Database,
                                                               make_cortex: MakeCortex,
                                                               tmp_path: Path) -> None:
    settings = laid_out(tmp_path)
    settings["onnx"]["tokenizer_sha256"] = "0" * 64
    with pytest.raises(InvalidInputError, match="not the pinned"):
        await make_cortex(age_database.dsn, embedder="onnx", embedding=settings)
    del settings["onnx"]
    with pytest.raises(InvalidInputError, match=r"needs embedding\.onnx"):
        await make_cortex(age_database.dsn, embedder="onnx", embedding=settings)
