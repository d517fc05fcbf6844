"""A post_recall hook may reorder and drop recall's hits, never add or change one
(docs/adr/0071): real hook processes, through HTTP, on real PostgreSQL."""

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from attested_cortex.hooks.reference import expand
from attested_cortex.hooks.reference.autolink import CortexClient as HookClient
from attested_cortex.hooks.reference.expand import Expander, Vocabulary
from attested_cortex.hooks.reference.meaning import Vectors
from tests.support.cortex import CortexClient, MakeCortex

REORDER = str(Path(__file__).parent / "programs" / "reorder.py")


@pytest.fixture
async def cortex(make_cortex: MakeCortex, migrated_pg15_dsn: str,
                 tmp_path: Path) -> tuple[CortexClient, list[str]]:
    hook = {"name": "reorder", "events": ["post_recall"], "mode": "daemon",
            "command": [sys.executable, REORDER], "timeout_ms": 300}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path)
    for words in ("zebra zebra zebra", "zebra zebra", "zebra"):
        await client.store("n", f"{words} crossing")
    fused = await recall(client, "keep")
    assert fused["rerank"] == "rerank: fused order kept" and len(fused["results"]) == 3
    return client, [h["id"] for h in fused["results"]]


async def recall(client: CortexClient, mode: str) -> dict[str, Any]:
    reply = await client.call("POST", "/v1/recall",
                              {"query": "zebra", "namespace": f"n/{mode}", "explain": True})
    assert reply.status == 200, reply.text
    body: dict[str, Any] = reply.body
    return body


async def test_a_hook_reorders_and_drops(cortex: tuple[CortexClient, list[str]]) -> None:
    client, fused = cortex
    body = await recall(client, "reverse")
    assert [h["id"] for h in body["results"]] == fused[::-1]
    assert [h["score"] for h in body["results"]] == [1.0, 2.0, 3.0]
    assert body["rerank"] == "reranked by reorder"
    assert [h["explain"]["fused"]["rank"] for h in body["results"]] == [3, 2, 1]
    assert all(h["content"].endswith("crossing") for h in body["results"])
    dropped = await recall(client, "drop")
    assert [h["id"] for h in dropped["results"]] == fused[-1:]
    assert dropped["tokens"] < body["tokens"]
    plain = await client.call("POST", "/v1/recall", {"query": "zebra", "namespace": "n/reverse"})
    assert [h["id"] for h in plain.body["results"]] == fused[::-1]
    assert "rerank" not in plain.body and "explain" not in plain.body["results"][0]
    # An allowing hook: the answer is made of the views the hook was sent (docs/adr/0076),
    # the same hits, scores and fields as the answer made afresh (here: with explain).
    kept = await client.call("POST", "/v1/recall", {"query": "zebra", "namespace": "n/keep"})
    explained = await recall(client, "keep")
    assert kept.body["results"] == [
        {k: v for k, v in hit.items() if k != "explain"} for hit in explained["results"]]
    assert [h["id"] for h in kept.body["results"]] == fused and "rerank" not in kept.body
    assert kept.body["tokens"] == explained["tokens"]


@pytest.mark.parametrize(("mode", "note"), [
    ("add", "rerank: hook error (reorder: refused)"),
    ("change", "rerank: hook error (reorder: refused)"),
    ("sleep", "rerank: timed out (reorder)"),
])
async def test_an_unsafe_or_late_answer_leaves_the_fused_order(
    cortex: tuple[CortexClient, list[str]], mode: str, note: str, caplog: pytest.LogCaptureFixture,
) -> None:
    client, fused = cortex
    body = await recall(client, mode)
    assert [h["id"] for h in body["results"]] == fused
    assert all(h["content"].endswith("crossing") for h in body["results"])
    assert body["rerank"] == note
    assert "explain" not in body["results"][0] or "fused" not in body["results"][0]["explain"]
    if mode != "sleep":
        assert any("unsafe reorder" in r.getMessage() for r in caplog.records)


async def test_the_expand_hook_reads_the_cortex_vocabulary(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False)
    for i in range(3):
        await client.store("n", f"The physician approves invoice {i}", title="billing")
    vocabulary = Vocabulary(Vectors())
    cortex = HookClient(client.base, token=None, agent_id="expand")
    monkeypatch.setattr(expand, "PAGE", 2)  # two pages: the cursor is followed
    pages = await asyncio.to_thread(expand.read_all, cortex, vocabulary)
    assert pages == 2
    assert len(vocabulary) == 4  # billing, physician, approves, invoice
    expander = Expander(vocabulary)
    assert expander.expansions("does the doctor accept the bills?")[:1] == ["physician"]
    held = {"event": "pre_recall", "payload": {"query": "the physician approves billing"}}
    assert expander.decide(held)["decision"] == "allow"  # one memory holds every word
