"""Writes sent with an Idempotency-Key (issue 23, ADR 0030), on a real server and PostgreSQL:
the same key and body answer the first write's answer and write nothing more; another body
is refused; keys belong to their agent; concurrent requests with one key write once; memories,
links and transcripts (stores, updates, deletes, invalidations) all take keys, over HTTP and
as MCP tool calls."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg

from tests.mcp.test_mcp_http import raw_session
from tests.support.cortex import CortexClient, MakeCortex, Reply

TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "chat/**", "retention_days": 1}]}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def rows(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


async def post(client: CortexClient, path: str, body: Any, key: str, **more: Any) -> Reply:
    return await client.call("POST", path, body, headers=keyed(key), **more)


async def test_a_repeated_key_answers_the_first_write_and_writes_once(
    cortex: CortexClient,
) -> None:
    body = {"namespace": "kb", "content": "once", "tags": ["a", "b"]}
    first = await post(cortex, "/v1/memories", body, "k-1")
    again = await post(cortex, "/v1/memories", {"tags": ["a", "b"], "content": "once",
                                                "namespace": "kb"}, "k-1")
    assert first.status == again.status == 201, (first.text, again.text)
    assert again.body == first.body and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert rows(cortex.dsn, "memories") == 1
    other = await post(cortex, "/v1/memories", {**body, "content": "twice?"}, "k-1")
    assert other.status == 409 and other.body["error"]["code"] == "idempotency_key_reused"
    elsewhere = await post(cortex, "/v1/transcripts", {"namespace": "kb", "content": "once"},
                           "k-1")  # another path
    assert elsewhere.status == 409, elsewhere.text
    assert rows(cortex.dsn, "memories") == 1
    audit = await cortex.call("GET", "/v1/audit/verify")
    assert audit.body["ok"] is True and audit.body["events"] == 1


async def test_keys_are_per_agent_and_malformed_keys_are_refused(cortex: CortexClient) -> None:
    body = {"namespace": "kb", "content": "mine"}
    alice = await post(cortex, "/v1/memories", body, "shared", agent="dev:alice")
    bob = await post(cortex, "/v1/memories", body, "shared", agent="dev:bob")
    assert alice.status == bob.status == 201 and alice.body["id"] != bob.body["id"]
    for bad in ("has space", "x" * 256):
        reply = await post(cortex, "/v1/memories", body, bad)
        assert reply.status == 400 and reply.body["error"]["details"]["field"] == (
            "Idempotency-Key"), reply.text
    assert rows(cortex.dsn, "memories") == 2


async def test_concurrent_requests_with_one_key_write_once(cortex: CortexClient) -> None:
    body = {"namespace": "kb", "content": "raced"}
    replies = await asyncio.gather(*(post(cortex, "/v1/memories", body, "race")
                                     for _ in range(8)))
    assert {r.status for r in replies} == {201}, [r.text for r in replies]
    assert len({r.body["id"] for r in replies}) == 1
    assert rows(cortex.dsn, "memories") == 1


async def test_a_refused_write_leaves_its_key_free(cortex: CortexClient) -> None:
    link = {"src_id": str(uuid.uuid4()), "dst_id": str(uuid.uuid4()), "relation": "related_to"}
    refused = await post(cortex, "/v1/links", link, "link-1")
    assert refused.status == 404, refused.text
    a, b = await cortex.store("kb", "a"), await cortex.store("kb", "b")
    link = {"src_id": a["id"], "dst_id": b["id"], "relation": "related_to"}
    made = await post(cortex, "/v1/links", link, "link-1")  # the refusal took no key
    again = await post(cortex, "/v1/links", link, "link-1")
    assert made.status == again.status == 201 and again.body == made.body
    assert rows(cortex.dsn, "links") == 1
    closing = {"link_id": made.body["id"]}
    closed = await post(cortex, "/v1/kg/invalidate", closing, "close-1")
    closed_again = await post(cortex, "/v1/kg/invalidate", closing, "close-1")
    assert closed.status == closed_again.status == 200 and closed_again.body == closed.body


async def test_updates_deletes_and_transcripts_take_keys(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS)
    memory = await client.store("kb", "v1")
    path = f"/v1/memories/{memory['id']}"
    patch = {"content": "v2"}
    updated = await client.call("PATCH", path, patch, headers=keyed("up"))
    replayed = await client.call("PATCH", path, patch, headers=keyed("up"))
    assert updated.body["revision"] == replayed.body["revision"] == 2, replayed.text
    deleted = await client.call("DELETE", path, headers=keyed("del"))
    deleted_again = await client.call("DELETE", path, headers=keyed("del"))
    assert deleted.status == deleted_again.status == 200
    assert deleted_again.headers["Idempotent-Replayed"] == "true"
    chat = {"namespace": "chat/1", "content": "user: hi\nagent: hello\n"}
    stored = await post(client, "/v1/transcripts", chat, "t-1")
    stored_again = await post(client, "/v1/transcripts", chat, "t-1")
    assert stored.status == stored_again.status == 201, stored.text
    assert stored_again.body == stored.body
    assert rows(client.dsn, "transcripts") == 1
    audit = await client.call("GET", "/v1/audit/verify")
    assert audit.body["ok"] is True and audit.body["events"] == 4  # store, update, delete, t


async def test_mcp_tool_calls_take_the_posts_key(cortex: CortexClient) -> None:
    session = await raw_session(cortex)

    async def store(key: str, content: str, n: int) -> dict[str, Any]:
        call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": "memory_store", "arguments": {"namespace": "kb", "content": content}}}
        reply = await cortex.call("POST", "/mcp", call, headers={**session, **keyed(key)})
        assert reply.status == 200, reply.text
        result: dict[str, Any] = reply.body["result"]
        return result

    first, again = await store("mcp-1", "via mcp", 1), await store("mcp-1", "via mcp", 2)
    assert first["isError"] is False and again["structuredContent"] == first[
        "structuredContent"]
    other = await store("mcp-1", "another", 3)
    assert other["isError"] is True
    assert other["structuredContent"]["error"]["code"] == "idempotency_key_reused"
    http = await post(cortex, "/v1/memories", {"namespace": "kb", "content": "via mcp"},
                      "mcp-1")  # the same key over HTTP is another operation
    assert http.status == 409, http.text
    assert rows(cortex.dsn, "memories") == 1
