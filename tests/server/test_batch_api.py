"""``POST /v1/memories:batch`` through HTTP on real PostgreSQL with real hook processes: all or
nothing (a failure at any index writes none and names it), hooks per memory, the storage
quota for the total, each memory its own chain record, and the Idempotency-Key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg

from tests.server.test_hooks_api import count_memories, hooks_file, recorded, recorder
from tests.support.cortex import CortexClient, MakeCortex


def batch(*contents: str, namespace: str = "team/notes", **more: Any) -> dict[str, Any]:
    return {"memories": [{"namespace": namespace, "content": c, **more} for c in contents]}


def chain_events(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute(
            "SELECT event_type FROM signed_events ORDER BY sequence").fetchall()]


async def test_batch_stores_in_order_each_recorded_and_verifies(cortex: CortexClient) -> None:
    body = batch("alpha", "beta", "gamma")
    # every character PostgreSQL's array input treats specially (the COPY sends literals)
    tags = ["a", "b,c", 'q"t', "b\\s\\", "{x}", "NULL", "s p", "\u00fc\u00df", "'"]
    body["memories"][1] |= {"namespace": "team/other", "tags": tags,
                            "metadata": {"k": [1]}, "title": "B"}
    body["memories"][2]["metadata"] = {"big": 10**30}  # past orjson's 64 bits: still answered
    reply = await cortex.call("POST", "/v1/memories:batch", body)
    assert reply.status == 201, reply.text
    stored = reply.body["memories"]
    assert [m["content"] for m in stored] == ["alpha", "beta", "gamma"]
    assert stored[1]["tags"] == tags and stored[1]["metadata"] == {"k": [1]}
    assert stored[2]["metadata"] == {"big": 10**30}
    assert len({m["id"] for m in stored}) == 3
    for memory in stored:
        assert (await cortex.call("GET", f"/v1/memories/{memory['id']}")).body == memory
    assert chain_events(cortex.dsn) == ["memory.stored"] * 3
    verified = await cortex.call("GET", "/v1/audit/verify?deep=true")
    assert verified.status == 200 and verified.body["ok"], verified.text
    found = await cortex.call("POST", "/v1/recall", {"query": "beta"})
    assert [r["id"] for r in found.body["results"]] == [stored[1]["id"]]


async def test_failure_at_index_k_writes_nothing_and_names_it(cortex: CortexClient) -> None:
    body = batch("one", "two", "three")
    # the citation is checked in the batch's transaction, after the key is taken
    body["memories"][2]["citations"] = [
        {"transcript_id": str(uuid.uuid4()), "start": 0, "end": 1}]
    key = {"Idempotency-Key": "batch-fails-at-2"}
    reply = await cortex.call("POST", "/v1/memories:batch", body, headers=key)
    assert reply.status in (400, 404), reply.text
    assert reply.body["error"]["details"]["index"] == 2
    assert reply.body["error"]["message"].startswith("memories[2]: ")
    assert count_memories(cortex.dsn) == 0 and chain_events(cortex.dsn) == []
    too_long = batch("ok", "x" * 300_000)
    refused = await cortex.call("POST", "/v1/memories:batch", too_long)
    assert refused.status == 413 and refused.body["error"]["details"]["index"] == 1
    del body["memories"][2]["citations"]  # the key was left free: the fixed batch takes it
    assert (await cortex.call("POST", "/v1/memories:batch", body, headers=key)).status == 201
    assert count_memories(cortex.dsn) == 3


async def test_deny_of_one_memory_refuses_the_batch_naming_its_index(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = recorder(tmp_path, events=["pre_store", "post_store"], name="guard")
    hook["env"]["RECORDER_DENY_CONTENT"] = "secret"
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook))
    reply = await client.call("POST", "/v1/memories:batch",
                              batch("fine", "also fine", "a secret", "never seen"))
    assert reply.status == 403, reply.text
    error = reply.body["error"]
    assert error["details"]["index"] == 2 and error["details"]["hook_code"] == "no_secrets"
    assert error["message"] == "memories[2]: not this one"
    assert count_memories(migrated_pg15_dsn) == 0
    seen = [r["payload"]["content"] for r in recorded(tmp_path)]
    assert seen == ["fine", "also fine", "a secret"]  # each in turn, stopping at the Deny
    (tmp_path / "record.jsonl").unlink()
    ok = await client.call("POST", "/v1/memories:batch", batch("x1", "x2"))
    assert ok.status == 201, ok.text
    events = [(r["event"], r["payload"].get("content")) for r in recorded(tmp_path)]
    assert events == [("pre_store", "x1"), ("pre_store", "x2"),
                      ("post_store", "x1"), ("post_store", "x2")]


async def test_storage_quota_is_checked_for_the_total(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"storage_per_agent_bytes": 100, "enabled": False})
    # each memory alone fits (61 bytes: namespace and content); the two together do not
    refused = await client.call("POST", "/v1/memories:batch",
                                batch("x" * 60, "y" * 60, namespace="n"))
    assert refused.status == 413, refused.text
    assert refused.body["error"]["details"]["adds"] == 122
    assert count_memories(migrated_pg15_dsn) == 0
    await client.store("n", "z" * 40)  # 41 stored: now a batch of 61 passes the cap
    late = await client.call("POST", "/v1/memories:batch", batch("w" * 60, namespace="n"))
    assert late.status == 413 and late.body["error"]["details"]["used"] == 41


async def test_a_keyed_batch_answers_once_even_when_its_answer_was_lost(
    cortex: CortexClient,
) -> None:
    key = {"Idempotency-Key": "batch-once"}
    body = batch("a", "b", "c")
    first = await cortex.call("POST", "/v1/memories:batch", body, headers=key)
    assert first.status == 201
    again = await cortex.call("POST", "/v1/memories:batch", body, headers=key)
    assert again.body == first.body and again.headers["Idempotent-Replayed"] == "true"
    with psycopg.connect(cortex.dsn, autocommit=True) as conn:  # the answer was never kept
        conn.execute("UPDATE idempotency_keys SET answer = NULL, status = NULL")
    rebuilt = await cortex.call("POST", "/v1/memories:batch", body, headers=key)
    assert rebuilt.status == 201 and rebuilt.body == first.body
    assert count_memories(cortex.dsn) == 3
    other = await cortex.call("POST", "/v1/memories:batch", batch("d"), headers=key)
    assert other.status == 409


async def test_batch_body_limit_is_the_one_capabilities_state_at_its_edge(
        cortex: CortexClient) -> None:
    """A batch body of exactly ``limits.max_batch_body_bytes`` is taken, one byte more is
    413 naming that limit, declared or streamed (it was 413 past 1 MiB, the single-memory
    body's limit, while capabilities said 16 MiB)."""
    limit = (await cortex.call("GET", "/v1/capabilities")).body["limits"][
        "max_batch_body_bytes"]
    encoded = json.dumps(batch("edge of the batch body")).encode()
    at_edge = encoded[:-1] + b" " * (limit - len(encoded)) + b"}"  # JSON whitespace pads it
    assert len(at_edge) == limit
    taken = await cortex.call("POST", "/v1/memories:batch", raw=at_edge)
    assert taken.status == 201, taken.text[:300]
    over = encoded[:-1] + b" " * (limit + 1 - len(encoded)) + b"}"
    refused = await cortex.call("POST", "/v1/memories:batch", raw=over)
    assert refused.status == 413 and refused.body["error"]["details"]["limit"] == limit

    async def streamed() -> AsyncIterator[bytes]:  # chunked: no Content-Length to refuse by
        for start in range(0, len(over), 1 << 20):
            yield over[start:start + (1 << 20)]

    async with cortex.session.post(
            cortex.base + "/v1/memories:batch", data=streamed(),
            headers={"X-Agent-Id": cortex.agent, "Content-Type": "application/json"}) as r:
        assert r.status == 413 and (await r.json())["error"]["details"]["limit"] == limit
    assert count_memories(cortex.dsn) == 1
