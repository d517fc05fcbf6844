"""The reference hooks: redaction (pre_store Modify) and the auto-link detector (post_store
daemon), run as real programs through the pipeline."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hack.support.waiting import await_until

from attested_cortex.hooks.reference.autolink import CortexClient, cosine, propose, terms
from attested_cortex.hooks.reference.redact import redact
from tests.hooks.conftest import PipelineFactory

pytestmark = pytest.mark.spawns  # the reference hooks run as child processes

REDACT = [sys.executable, "-m", "attested_cortex.hooks.reference.redact"]
AUTOLINK = [sys.executable, "-m", "attested_cortex.hooks.reference.autolink"]
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
       "-----END OPENSSH PRIVATE KEY-----")

SECRETS = [
    (PEM, "private_key"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "bearer_token"),
    ("ghp_" + "a" * 36, "github_token"),
    ("xoxb-1234567890-abcdefghij", "slack_token"),
    ("sk-ant-" + "b" * 40, "api_key"),
    ("AIza" + "c" * 35, "google_api_key"),
    ("password: hunter2hunter2hunter2", "api_key"),
]


@pytest.mark.parametrize(("secret", "kind"), SECRETS)
def test_redact_masks_each_kind(secret: str, kind: str) -> None:
    masked, found = redact(f"before {secret} after")
    assert found == [kind]
    assert f"[REDACTED:{kind}]" in masked and masked.startswith("before ")
    assert masked.endswith(" after")


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "The deploy key rotation is scheduled for Tuesday; ask Sam for the token policy."
    assert redact(text) == (text, [])


@pytest.mark.parametrize("mode", ["exec", "daemon"])
async def test_redact_hook_modifies_the_payload(make_pipeline: PipelineFactory, mode: str) -> None:
    pipeline = await make_pipeline(
        {"name": "redact", "events": ["pre_store"], "mode": mode, "command": REDACT}
    )
    payload = {"namespace": "n", "title": "creds", "content": f"my key is {PEM} ok"}
    result = await pipeline.fire("pre_store", payload, agent_id="a", namespace="n")
    assert result.modified and result.decision == "allow"
    assert result.payload["content"] == "my key is [REDACTED:private_key] ok"
    assert result.payload["title"] == "creds"
    clean = await pipeline.fire("pre_store", {"content": "hello"}, agent_id="a", namespace="n")
    assert not clean.modified and clean.records[0].answer == "allow"


def test_similarity_scores() -> None:
    text = "PostgreSQL backups run nightly with pg_dump into the archive bucket"
    assert cosine(terms(text), terms(text)) == pytest.approx(1.0)
    assert cosine(terms(text), terms("Cats sleep most of the afternoon")) == 0.0
    assert cosine(terms(""), terms(text)) == 0.0


def test_propose_same_namespace_similar_only() -> None:
    memory = {"id": "new", "namespace": "ops",
              "content": "PostgreSQL backups run nightly with pg_dump into the archive bucket"}
    candidates = [
        {"id": "new", "namespace": "ops", "content": memory["content"]},
        {"id": "near", "namespace": "ops",
         "content": "Nightly PostgreSQL backups run with pg_dump into the archive bucket"},
        {"id": "elsewhere", "namespace": "dev", "content": memory["content"]},
        {"id": "far", "namespace": "ops", "content": "The cafeteria menu changes on Mondays"},
    ]
    proposals = propose(memory, candidates, threshold=0.5, max_links=3)
    assert [p.dst_id for p in proposals] == ["near"]


@pytest.fixture
async def cortex_api(unused_tcp_port: int) -> AsyncIterator[dict[str, Any]]:
    """A minimal stand-in for the cortex recall and link endpoints, recording calls."""
    seen: dict[str, Any] = {"links": [], "headers": [], "auth": [], "port": unused_tcp_port}

    async def recall(request: web.Request) -> web.Response:
        seen["headers"].append(request.headers.get("X-Agent-Id"))
        seen["auth"].append(request.headers.get("Authorization"))
        return web.json_response({"results": [
            {"id": "m-old", "namespace": "ops", "score": 0.9,
             "content": "nightly postgresql backups with pg_dump to the archive bucket"},
            {"id": "m-other", "namespace": "ops", "score": 0.1, "content": "lunch menu"},
        ], "truncated": False})

    async def links(request: web.Request) -> web.Response:
        seen["links"].append(await request.json())
        return web.json_response({"id": "l1"}, status=201)

    app = web.Application()
    app.add_routes([web.post("/v1/recall", recall), web.post("/v1/links", links)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    yield seen
    await runner.cleanup()


async def test_autolink_daemon_links_similar_memories(
    make_pipeline: PipelineFactory, cortex_api: dict[str, Any]
) -> None:
    env = {"CORTEX_URL": f"http://127.0.0.1:{cortex_api['port']}", "CORTEX_AGENT_ID": "autolink"}
    pipeline = await make_pipeline(
        {"name": "autolink", "events": ["post_store"], "mode": "daemon", "command": AUTOLINK,
         "env": env}
    )
    memory = {"id": "m-new", "namespace": "ops",
              "content": "PostgreSQL backups run nightly with pg_dump to the archive bucket"}
    result = await pipeline.fire("post_store", memory, agent_id="a", namespace="ops")
    assert result.decision == "allow" and result.records[0].failure is None
    await await_until(lambda: len(cortex_api["links"]) == 1, seconds=10)
    assert cortex_api["links"] == [{"src_id": "m-new", "dst_id": "m-old",
                                    "relation": "related_to"}]
    assert cortex_api["headers"] == ["autolink"]


async def test_autolink_client_rereads_its_token_file(
    cortex_api: dict[str, Any], tmp_path: Path
) -> None:
    """A sidecar's service-account token rotates: each call sends the file's current token."""
    token = tmp_path / "token"
    token.write_text("first\n")
    client = CortexClient(f"http://127.0.0.1:{cortex_api['port']}", token=None,
                          agent_id=None, token_file=str(token))
    await asyncio.to_thread(client.post, "/v1/recall", {"query": "x"})
    token.write_text("second")
    await asyncio.to_thread(client.post, "/v1/recall", {"query": "x"})
    assert cortex_api["auth"] == ["Bearer first", "Bearer second"]
    assert cortex_api["headers"] == [None, None]


RERANK = [sys.executable, "-m", "attested_cortex.hooks.reference.rerank"]
EXPAND = [sys.executable, "-m", "attested_cortex.hooks.reference.expand"]


async def test_rerank_hook_puts_the_meaningful_hit_first(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline({"name": "rerank", "events": ["post_recall"],
                                    "mode": "daemon", "command": RERANK, "timeout_ms": 2000})
    hits = [{"id": "soup", "content": "The cafeteria serves soup on Mondays.", "score": 0.5},
            {"id": "freeze", "content": "Deploys freeze on Fridays after 3pm.", "score": 0.45}]
    payload = {"query": "when can't we ship a release?", "namespace": None, "limit": 10,
               "budget_tokens": None, "results": hits, "truncated": False}
    result = await pipeline.fire("post_recall", payload, agent_id="a", namespace=None)
    assert result.modified and result.reorder_note == "reranked by rerank"
    assert [h["id"] for h in result.payload["results"]] == ["freeze", "soup"]
    assert result.payload["results"][1]["content"] == hits[0]["content"]


async def test_expand_hook_adds_related_words_it_learned(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline({"name": "expand", "events": ["pre_recall", "post_store"],
                                    "mode": "daemon", "command": EXPAND, "timeout_ms": 2000})
    query = {"query": "does the doctor accept the bills?", "namespace": None, "limit": 10,
             "budget_tokens": None}
    unknown = await pipeline.fire("pre_recall", query, agent_id="a", namespace=None)
    assert not unknown.modified  # nothing learned yet: nothing to expand with
    memory = {"id": "m", "namespace": "n", "content": "The physician approves the invoices."}
    await pipeline.fire("post_store", memory, agent_id="a", namespace="n")

    async def expanded() -> bool:
        result = await pipeline.fire("pre_recall", query, agent_id="a", namespace=None)
        return str(result.payload["query"]).startswith(query["query"] + " ") and (
            "physician" in str(result.payload["query"]))

    await await_until(expanded, what="the stored memory's words expanding the query", seconds=20)
