"""``cortexctl serve --embedder``: the flag reaches the running server, a bad value stops it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request
from pathlib import Path

from hack.support.served import CORTEXCTL, free_port, serve

from attested_cortex.embedding import default, minilm
from attested_cortex.store.migrating import migrate
from tests.support.postgres import Database


def recall_caps(base: str) -> dict[str, object]:
    request = urllib.request.Request(f"{base}/v1/capabilities",
                                     headers={"X-Agent-Id": "dev:cli"})
    with urllib.request.urlopen(request, timeout=10) as response:
        caps: dict[str, object] = json.load(response)["recall"]
        return caps


def test_embedder_flag(age_database: Database, tmp_path: Path) -> None:
    asyncio.run(migrate(age_database.dsn))
    with serve(age_database.dsn, tmp_path) as served:  # MiniLM by default (docs/adr/0097)
        caps = recall_caps(served.base)
        assert caps["mode"] == "hybrid"
        assert caps["embedder"] == {"source": "default", "model": minilm.MODEL,
                                    "dimension": minilm.DIMENSION}
    with serve(age_database.dsn, tmp_path, "--embedder", "static") as served:
        caps = recall_caps(served.base)
        assert caps["embedder"] == {"source": "default", "model": default.MODEL,
                                    "dimension": default.DIMENSION}
    with serve(age_database.dsn, tmp_path, "--embedder", "none") as served:
        caps = recall_caps(served.base)
        assert caps["mode"] == "fulltext" and caps["embedder"] is None


def test_bad_embedder_flag_is_a_clear_exit(age_database: Database) -> None:
    asyncio.run(migrate(age_database.dsn))
    done = subprocess.run(
        [*CORTEXCTL, "serve", "--database-url", age_database.dsn,
         "--listen", f"127.0.0.1:{free_port()}", "--embedder", "ftp://example.invalid"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "use minilm, static, default, onnx, none, client or an http(s) URL" in done.stderr
