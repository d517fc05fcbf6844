"""The MCP endpoint (/mcp) driven by the official SDK's client over Streamable HTTP, against
a real server on real PostgreSQL: both protocol eras (the initialize handshake with its
Mcp-Session-Id, and the 2026-07-28 per-request envelope), the tools going through the same
pipeline as the HTTP routes (hooks, rules, limits, authentication) with the same error
codes, and capabilities reporting the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import warnings
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hack.support.waiting import await_until
from mcp.shared.exceptions import MCPError
from multidict import CIMultiDict

from attested_cortex.attest.keyfiles import PRIVATE_FILE, write_identity
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from attested_cortex.types import AgentId
from tests.mcp.conftest import mcp_client
from tests.server.test_attestation_api import SELF_SIGNER, client_signature
from tests.server.test_hooks_api import count_memories, hooks_file, recorded, recorder
from tests.server.test_permissions_api import deny_rule
from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import DIALOGUE

EXPECTED_TOOLS = {
    "memory_store", "memory_get", "memory_update", "memory_forget", "memory_list",
    "memory_recall", "memory_verify", "link_create", "link_invalidate", "link_verify",
    "kg_query", "kg_paths", "kg_timeline", "audit_verify", "capabilities", "approvals_list",
    "approval_decide", "transcript_store", "memory_replay", "memory_store_batch",
    "spoke_memory", "audit_checkpoint", "audit_proof", "audit_consistency",
    "federation_quarantine",
    "subscription_create", "subscription_list", "subscription_get", "subscription_update",
    "subscription_delete", "subscription_replay", "dead_letters_list", "dead_letter_get",
    "dead_letters_replay", "dead_letters_purge",
}


def ok(result: Any) -> dict[str, Any]:
    """The structured answer of a successful tool call (its text is the same JSON)."""
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


def error(result: Any) -> dict[str, Any]:
    """The error envelope of a failed tool call: ``{"error": {...}, "status": N}``."""
    assert result.is_error, result.structured_content
    body: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == body
    return body


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_listed_with_schemas_from_the_api_models(
    cortex: CortexClient, mode: str,
) -> None:
    async with mcp_client(cortex, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == EXPECTED_TOOLS
    openapi = (await cortex.call("GET", "/v1/openapi.json")).body["components"]["schemas"]
    store = tools["memory_store"].input_schema
    # A tool's schema is self-contained: nested models under its own $defs, not components.
    assert store["$defs"]["Cite"] == openapi["Cite"]
    assert json.loads(json.dumps(store["properties"]).replace(
        "#/$defs/", "#/components/schemas/")) == openapi["StoreMemory"]["properties"]
    assert store["additionalProperties"] is False and store["required"] == ["namespace",
                                                                             "content"]
    recall = tools["memory_recall"].input_schema["properties"]
    assert recall["budget_tokens"] == openapi["RecallQuery"]["properties"]["budget_tokens"]
    assert tools["link_create"].input_schema["properties"] == \
        openapi["CreateLink"]["properties"]
    assert tools["memory_recall"].annotations.read_only_hint is True
    assert tools["memory_store"].annotations.read_only_hint is False


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_store_recall_get_update_list_forget(cortex: CortexClient, mode: str) -> None:
    async with mcp_client(cortex, mode=mode) as client:
        stored = ok(await client.call_tool("memory_store", {
            "namespace": "proj/a", "content": "the deploy key rotates every friday",
            "title": "rotation", "tags": ["ops"]}))
        assert stored["author"] == cortex.agent and stored["revision"] == 1
        fillers = ok(await client.call_tool("memory_store_batch", {"memories": [
            {"namespace": "proj/a", "content": f"friday filler memory number {i} " * 20}
            for i in range(5)]}))["memories"]
        assert [m["revision"] for m in fillers] == [1] * 5
        found = ok(await client.call_tool("memory_recall", {"query": "deploy key rotates",
                                                            "namespace": "proj/a"}))
        assert found["results"][0]["id"] == stored["id"]
        budget = ok(await client.call_tool("memory_recall", {"query": "friday",
                                                             "budget_tokens": 40}))
        assert budget["truncated"] is True and budget["tokens"] <= 40
        assert ok(await client.call_tool("memory_get", {"id": stored["id"]}))["title"] == \
            "rotation"
        updated = ok(await client.call_tool("memory_update", {
            "id": stored["id"], "title": "key rotation", "expected_revision": 1}))
        assert updated["revision"] == 2 and updated["content"] == stored["content"]
        stale = error(await client.call_tool("memory_update", {
            "id": stored["id"], "title": "x", "expected_revision": 1}))
        assert stale["status"] == 409
        listed = ok(await client.call_tool("memory_list", {"namespace": "proj", "limit": 3}))
        assert len(listed["memories"]) == 3
        gone = ok(await client.call_tool("memory_forget", {"id": stored["id"]}))
        assert gone["deleted"] is True
        missing = error(await client.call_tool("memory_get", {"id": str(uuid.uuid4())}))
    http = await cortex.call("GET", f"/v1/memories/{uuid.uuid4()}")
    assert missing["status"] == http.status == 404
    assert missing["error"]["code"] == http.body["error"]["code"]
    # what the tool wrote is what the HTTP API reads
    assert (await cortex.call("GET", f"/v1/memories/{stored['id']}")).body["deleted"] is True


async def test_ping_and_sessions(cortex: CortexClient) -> None:
    async with mcp_client(cortex) as client:
        with warnings.catch_warnings():  # ping is gone from 2026-07-28; handshake era keeps it
            warnings.simplefilter("ignore")
            await client.send_ping()
        caps = ok(await client.call_tool("capabilities", {}))
        assert caps["mcp"]["sessions"]["open"] == 1
    after = (await cortex.call("GET", "/v1/capabilities")).body["mcp"]
    assert after["sessions"]["open"] == 0  # the client's DELETE ended its session


async def test_signed_link_created_and_verified(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    agent_b = generate_key(AgentId(SELF_SIGNER))
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId("dev:tester")))
    write_identity(keys / "agent-b", agent_b)
    (keys / "agent-b" / PRIVATE_FILE).unlink()  # Agent custody: only the public key here
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                               graph_backend="CTE")
    await check_signed_link(cortex, agent_b)


async def check_signed_link(cortex: CortexClient, agent_b: AgentKey) -> None:
    async with mcp_client(cortex, agent=SELF_SIGNER) as client:
        a = ok(await client.call_tool("memory_store", {"namespace": "kb", "content": "one"}))
        b = ok(await client.call_tool("memory_store", {"namespace": "kb", "content": "two"}))
        body: dict[str, Any] = {"src_id": a["id"], "dst_id": b["id"], "relation": "supersedes",
                                "valid_from": "2026-11-01T10:00:00.123Z"}
        body["signature"] = client_signature(agent_b, body)
        link = ok(await client.call_tool("link_create", body))
        assert link["attest_level"] == "peer_attested" and link["signed_by"] == SELF_SIGNER
        verified = ok(await client.call_tool("link_verify", {"id": link["id"]}))
        assert verified["signature_verified"] is True
        assert verified["attest_level"] == "peer_attested"
        forged = {**body, "relation": "contradicts"}  # signature over another statement
        bad = error(await client.call_tool("link_create", forged))
        walk = ok(await client.call_tool("kg_query", {"start_id": a["id"], "depth": 1}))
        assert {n["id"] for n in walk["nodes"]} == {a["id"], b["id"]}
        paths = ok(await client.call_tool("kg_paths", {"src_id": a["id"], "dst_id": b["id"]}))
        assert paths["paths"][0]["links"] == [link["id"]]
        timeline = ok(await client.call_tool("kg_timeline", {"memory_id": a["id"]}))
        assert [x["id"] for x in timeline["links"]] == [link["id"]]
        closed = ok(await client.call_tool("link_invalidate", {"link_id": link["id"]}))
        assert closed["valid_until"] is not None
        chain = ok(await client.call_tool("audit_verify", {"deep": True}))
        assert chain["ok"] is True and chain["deep"]["ok"] is True
    http = await cortex.call("POST", "/v1/links", forged, agent=SELF_SIGNER)
    assert (bad["status"], bad["error"]["code"]) == (http.status, http.body["error"]["code"])


async def test_deny_hook_refuses_exactly_like_http_and_hooks_fire(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    deny = recorder(tmp_path, events=["pre_store"], mode="exec",
                    answer={"decision": "deny", "reason": "not here", "code": "policy_x"})
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, deny))
    body = {"namespace": "n", "content": "c"}
    http = await cortex.call("POST", "/v1/memories", body)
    async with mcp_client(cortex) as client:
        refused = error(await client.call_tool("memory_store", body))
    assert http.status == refused["status"] == 403
    assert refused["error"] == http.body["error"]
    assert count_memories(migrated_pg15_dsn) == 0
    fired = [r for r in recorded(tmp_path) if r["event"] == "pre_store"]
    assert len(fired) == 2 and fired[0]["payload"] == fired[1]["payload"]


async def test_hooks_fire_from_mcp(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    events = ["pre_store", "post_store", "pre_recall", "post_recall", "pre_link", "post_link"]
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks_file(tmp_path, recorder(tmp_path, events=events)))
    async with mcp_client(cortex, mode="auto") as client:
        a = ok(await client.call_tool("memory_store", {"namespace": "h", "content": "alpha"}))
        b = ok(await client.call_tool("memory_store", {"namespace": "h", "content": "beta"}))
        ok(await client.call_tool("memory_recall", {"query": "alpha"}))
        ok(await client.call_tool("link_create", {"src_id": a["id"], "dst_id": b["id"],
                                                  "relation": "related_to"}))
    seen = recorded(tmp_path)
    assert {r["event"] for r in seen} == set(events)
    assert all(r["agent_id"] == cortex.agent for r in seen)
    assert next(r for r in seen if r["event"] == "pre_store")["payload"]["content"] == "alpha"


async def test_deny_rule_refuses_exactly_like_http(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               permissions={"mode": "enforce", "rules": [deny_rule()]})
    body = {"namespace": "secret/keys", "content": "k"}
    http = await cortex.call("POST", "/v1/memories", body)
    async with mcp_client(cortex) as client:
        refused = error(await client.call_tool("memory_store", body))
        allowed = ok(await client.call_tool("memory_store", {"namespace": "open", "content": "k"}))
    assert http.status == refused["status"] == 403
    assert refused["error"] == http.body["error"]
    assert refused["error"]["details"]["source"] == "rule:prod/no-secrets"
    assert allowed["namespace"] == "open"
    assert count_memories(migrated_pg15_dsn) == 1


async def test_bad_arguments_are_tool_errors_with_the_http_codes(cortex: CortexClient) -> None:
    cases: list[tuple[str, dict[str, Any], str, dict[str, Any] | None]] = [
        ("memory_store", {"namespace": "t"}, "/v1/memories", {"namespace": "t"}),
        ("memory_store", {"namespace": "t", "content": "x", "colour": "red"}, "/v1/memories",
         {"namespace": "t", "content": "x", "colour": "red"}),
        ("memory_store", {"namespace": "../t", "content": "x"}, "/v1/memories",
         {"namespace": "../t", "content": "x"}),
        ("memory_store", {"namespace": "t", "content": "nul \u0000"}, "/v1/memories",
         {"namespace": "t", "content": "nul \u0000"}),
        ("memory_recall", {"query": "x", "limit": 0}, "/v1/recall", {"query": "x", "limit": 0}),
        ("memory_recall", {"query": "x", "budget_tokens": "many"}, "/v1/recall",
         {"query": "x", "budget_tokens": "many"}),
        ("kg_query", {"start_id": "nope"}, "/v1/kg/query", {"start_id": "nope"}),
    ]
    async with mcp_client(cortex) as client:
        for tool, arguments, path, body in cases:
            got = error(await client.call_tool(tool, arguments))
            http = await cortex.call("POST", path, body)
            assert (got["status"], got["error"]["code"], got["error"]["details"].get("field")) \
                == (http.status, http.body["error"]["code"],
                    http.body["error"]["details"].get("field")), (tool, arguments)
        unknown = error(await client.call_tool("memory_teleport", {}))
        assert (unknown["status"], unknown["error"]["code"]) == (404, "unknown_tool")
        # the session survived all of it
        assert ok(await client.call_tool("memory_list", {}))["memories"] == []
    assert count_memories(cortex.dsn) == 0


HOSTILE = [  # raw JSON text of the arguments: what no SDK client would encode
    ('{"namespace":"t","content":"x","metadata":{"d":' + "[" * 100 + "1" + "]" * 100 + "}}",
     "too_deep"),
    ('{"namespace":"t","content":"x","metadata":{"d":' + "[" * 3000 + "]" * 3000 + "}}",
     "too_deep"),
    ('{"namespace":"t","content":"x","metadata":{"n":NaN}}', "bad_json"),
    ('{"namespace":"t","content":"x","metadata":{"n":1e999}}', "bad_json"),
    ('{"namespace":"t","content":"x","metadata":{"n":' + "9" * 4301 + "}}", "bad_json"),
    ('{"namespace":"t","content":"lone \\ud800"}', "bad_encoding"),
    ('{"namespace":"t","content":"x","metadata":{"\\udfff":1}}', "bad_encoding"),
]


async def raw_session(cortex: CortexClient) -> dict[str, str]:
    """A handshake-era session opened by hand (initialize, initialized): its headers."""
    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    opened = await cortex.call("POST", "/mcp", hello, headers=accept)
    assert opened.status == 200, opened.text
    session = {**accept, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
               "MCP-Protocol-Version": "2025-11-25"}
    done = await cortex.call("POST", "/mcp", {"jsonrpc": "2.0",
                                              "method": "notifications/initialized"},
                             headers=session)
    assert done.status == 202, done.text
    return session


async def test_hostile_json_is_a_tool_error_or_a_parse_error_never_a_500(
    cortex: CortexClient,
) -> None:
    session = await raw_session(cortex)
    for n, (arguments, code) in enumerate(HOSTILE, 1):
        raw = ('{"jsonrpc":"2.0","id":' + str(n) + ',"method":"tools/call","params":'
               '{"name":"memory_store","arguments":' + arguments + "}}").encode()
        reply = await cortex.call("POST", "/mcp", raw=raw, headers=session)
        assert reply.status < 500, (arguments[:80], reply.text)
        if reply.status == 200 and "result" in reply.body:
            result = reply.body["result"]
            assert result["isError"] is True, (arguments[:80], result)
            got = result["structuredContent"]
            assert (got["status"], got["error"]["code"]) == (400, code), arguments[:80]
        else:  # the SDK's own JSON parser refused the message: a JSON-RPC error, no write
            assert reply.body["error"]["code"] in (-32700, -32600, -32602), reply.text
        http = await cortex.call("POST", "/v1/memories", raw=arguments.encode())
        assert http.status == 400, http.text
    listing = await cortex.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 99,
                                                 "method": "tools/list"}, headers=session)
    assert listing.status == 200 and len(listing.body["result"]["tools"]) == len(EXPECTED_TOOLS)
    assert count_memories(cortex.dsn) == 0


async def test_huge_arguments_hit_the_size_limits(cortex: CortexClient) -> None:
    limits = (await cortex.call("GET", "/v1/capabilities")).body["limits"]
    async with mcp_client(cortex) as client:
        content = "w" * (limits["max_content_chars"] + 1)
        got = error(await client.call_tool("memory_store", {"namespace": "t",
                                                            "content": content}))
        http = await cortex.call("POST", "/v1/memories", {"namespace": "t", "content": content})
        assert (got["status"], got["error"]["code"]) == (http.status, "too_large") == \
            (413, "too_large")
        # arguments past max_body_bytes (the HTTP body limit): refused before any model
        body = {"namespace": "t", "content": "x",
                "metadata": {"blob": "b" * limits["max_body_bytes"]}}
        got = error(await client.call_tool("memory_store", body))
        assert (got["status"], got["error"]["code"]) == (413, "too_large")
        assert got["error"]["details"]["limit"] == limits["max_body_bytes"]
        # a message far past it is refused by the transport before it is parsed
        with pytest.raises(MCPError):
            await client.call_tool("memory_store", {"namespace": "t",
                                                    "content": "z" * (3 * 1024 * 1024)})
        assert ok(await client.call_tool("memory_list", {}))["memories"] == []


async def test_concurrent_sessions_keep_their_callers(cortex: CortexClient) -> None:
    async def agent_session(n: int) -> tuple[str, list[str]]:
        agent = f"dev:agent-{n}"
        async with mcp_client(cortex, agent=agent, mode="legacy" if n % 2 else "auto") as c:
            ids = []
            for i in range(5):
                stored = ok(await c.call_tool("memory_store", {
                    "namespace": f"team/{n}", "content": f"note {i} of agent {n}"}))
                assert stored["author"] == agent
                ids.append(stored["id"])
            listed = ok(await c.call_tool("memory_list", {"namespace": f"team/{n}"}))
            assert sorted(m["id"] for m in listed["memories"]) == sorted(ids)
            return agent, ids

    results = await asyncio.gather(*(agent_session(n) for n in range(8)))
    assert count_memories(cortex.dsn) == 40
    for agent, ids in results:
        for memory_id in ids:
            assert (await cortex.call("GET", f"/v1/memories/{memory_id}")).body["author"] == agent


async def test_a_session_belongs_to_the_agent_that_opened_it(cortex: CortexClient) -> None:
    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    opened = await cortex.call("POST", "/mcp", hello, headers=accept, agent="dev:alice")
    assert opened.status == 200, opened.text
    session = {**accept, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
               "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    stolen = await cortex.call("POST", "/mcp", listing, headers=session, agent="dev:mallory")
    assert stolen.status == 404  # as if the session did not exist
    anonymous = await cortex.call("POST", "/mcp", listing, headers=session, agent=None)
    assert anonymous.status == 401 and anonymous.body["error"]["code"] == "unauthenticated"


async def test_one_agent_cannot_hold_every_session(cortex: CortexClient) -> None:
    """A client that initializes in a loop and never ends its sessions stops at its own cap
    (429, the HTTP envelope) instead of taking all 10 000 for 30 minutes from every agent;
    ending one frees a place, and neither other agents nor the per-request era are held up.
    Before the cap, the 101st initialize of one agent was a 200 like the 10 000th."""
    from attested_cortex.mcp.serving import MAX_SESSIONS_PER_AGENT

    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}

    async def initialize(agent: str, **extra: str) -> Any:
        return await cortex.call("POST", "/mcp", hello, headers={**accept, **extra},
                                 agent=agent)

    # concurrently, so the cap is checked against openings still in flight too
    opened = await asyncio.gather(*(initialize("dev:greedy")
                                    for _ in range(MAX_SESSIONS_PER_AGENT + 20)))
    assert sorted(r.status for r in opened) == \
        [200] * MAX_SESSIONS_PER_AGENT + [429] * 20
    refused = next(r for r in opened if r.status == 429)
    assert refused.body["error"]["code"] == "too_many_sessions"
    assert refused.body["error"]["details"]["limit"] == MAX_SESSIONS_PER_AGENT
    # a repeated version header counts as the SDK reads it (the first): no way around
    repeated = CIMultiDict([*accept.items(), ("X-Agent-Id", "dev:greedy"),
                            ("MCP-Protocol-Version", "2025-11-25"),
                            ("MCP-Protocol-Version", "2026-07-28")])
    async with cortex.session.post(f"{cortex.base}/mcp", json=hello,
                                   headers=repeated) as sneaky:
        assert sneaky.status == 429
    assert (await initialize("dev:other")).status == 200
    async with mcp_client(cortex, agent="dev:greedy", mode="auto") as client:
        assert ok(await client.call_tool("memory_list", {}))["memories"] == []
    caps = (await cortex.call("GET", "/v1/capabilities")).body["mcp"]["sessions"]
    assert (caps["open"], caps["max_per_agent"]) == (MAX_SESSIONS_PER_AGENT + 1,
                                                     MAX_SESSIONS_PER_AGENT)
    first = next(r for r in opened if r.status == 200)
    ended = await cortex.call("DELETE", "/mcp", agent="dev:greedy", headers={
        **accept, "Mcp-Session-Id": first.headers["Mcp-Session-Id"],
        "MCP-Protocol-Version": "2025-11-25"})
    assert ended.status == 200, ended.text
    assert (await initialize("dev:greedy")).status == 200


async def test_a_session_stream_opens_at_once_and_a_dropped_one_can_be_reopened(
    cortex: CortexClient, caplog: pytest.LogCaptureFixture,
) -> None:
    """GET /mcp answers its headers at once, not with the first keep-alive ping 15 s on;
    a client that drops its stream can open the session's one stream again within a
    second or two (before: 409 until a ping failed, 15-30 s, then an error logged)."""
    session = {**await raw_session(cortex), "X-Agent-Id": cortex.agent}
    async with aiohttp.ClientSession() as http:
        async with asyncio.timeout(10):
            dropped = await http.get(f"{cortex.base}/mcp", headers=session)
        assert dropped.status == 200
        assert dropped.headers["Content-Type"].startswith("text/event-stream")
        async with http.get(f"{cortex.base}/mcp", headers=session) as second:
            assert second.status == 409  # one stream per session
        dropped.close()  # the client goes away without a word

    async def reopen() -> aiohttp.ClientResponse | None:
        reopened = await cortex.session.get(f"{cortex.base}/mcp", headers=session)
        if reopened.status == 200:
            return reopened
        assert reopened.status == 409, await reopened.text()
        reopened.release()
        return None

    reopened = await await_until(reopen, what="the server to notice the dropped stream",
                                 seconds=10, interval_s=0.1)
    reopened.close()
    ended = await cortex.call("DELETE", "/mcp", headers=session)
    assert ended.status == 200, ended.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_concurrent_requests_of_a_session_sharing_an_id_all_get_an_answer(
    cortex: CortexClient,
) -> None:
    """The SDK routes a session's answers by request id: two requests in flight with one
    id lost an answer (one POST waited for ever, another got a different tool's result).
    Each now gets its own answer or 409 request_id_in_use at once, the id is free again
    after, and another agent presenting the session still learns nothing (404)."""
    session = await raw_session(cortex)
    for i in range(30):
        await cortex.store("t", f"note {i} " * 50)
    calls = [("audit_verify", {"deep": True}, "ok"), ("memory_list", {"limit": 1}, "memories"),
             ("capabilities", {}, "mcp"), ("memory_recall", {"query": "note"}, "results")]

    async def call(name: str, arguments: dict[str, Any], agent: str = "") -> Any:
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}
        async with asyncio.timeout(10):
            return await cortex.call("POST", "/mcp", message, headers=session, agent=agent)

    answers = await asyncio.gather(*(call(name, arguments) for name, arguments, _ in calls))
    for (name, _, key), reply in zip(calls, answers, strict=True):
        assert reply.status in (200, 409), (name, reply.text)
        if reply.status == 200:
            assert key in reply.body["result"]["structuredContent"], (name, reply.text[:200])
        else:
            assert reply.body["error"]["code"] == "request_id_in_use"
    assert any(reply.status == 409 for reply in answers)  # they did overlap
    again = await call("memory_list", {"limit": 1})
    assert again.status == 200 and len(again.body["result"]["structuredContent"]["memories"]) == 1
    stranger = await call("memory_list", {"limit": 1}, agent="dev:mallory")
    assert stranger.status == 404


async def test_bearer_tokens_authenticate_mcp(make_cortex: MakeCortex, pg15_dsn: str,
                                              tmp_path: Path) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} k8s:team/writer\n")
    cortex = await make_cortex(pg15_dsn, auth=TokenAuth.from_file(tmp_path / "tokens"))
    async with mcp_client(cortex, headers={"Authorization": f"Bearer {token}"}) as client:
        stored = ok(await client.call_tool("memory_store", {"namespace": "t", "content": "c"}))
    assert stored["author"] == "k8s:team/writer"
    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in task groups
        async with mcp_client(cortex, headers={"Authorization": "Bearer nope"}) as client:
            await client.list_tools()
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    refused = await cortex.call("POST", "/mcp", hello, agent=None,
                                headers={"Authorization": "Bearer nope"})
    assert refused.status == 401 and refused.body["error"]["code"] == "unauthenticated"


async def test_capabilities_report_the_mounted_endpoint(cortex: CortexClient) -> None:
    http = (await cortex.call("GET", "/v1/capabilities")).body["mcp"]
    assert http["enabled"] is True and http["path"] == "/mcp"
    assert http["transport"] == "streamable-http"
    assert http["latest_protocol_version"] == "2026-07-28"
    assert "2025-11-25" in http["protocol_versions"]
    assert set(http["tools"]) == EXPECTED_TOOLS
    async with mcp_client(cortex, mode="auto") as client:
        tool = ok(await client.call_tool("capabilities", {}))
    assert tool["mcp"]["path"] == "/mcp" and tool["schema_version"] == \
        (await cortex.call("GET", "/v1/capabilities")).body["schema_version"]


async def test_capabilities_without_the_endpoint_say_so(cortex: CortexClient) -> None:
    from attested_cortex.server.app import build_app
    from attested_cortex.server.auth import DevAuth
    from attested_cortex.service.pipeline.context import Services
    from attested_cortex.service.resources.introspection import mcp

    bare = Services(db=cortex.services.db)
    app = build_app(bare, auth=DevAuth(), mcp=False)
    assert ("POST", "/mcp") not in {(r.method, r.resource.canonical)
                                    for r in app.router.routes() if r.resource is not None}
    assert mcp(bare) == {"enabled": False,
                         "reason": "no MCP endpoint is mounted in this process"}


async def test_held_for_approval_decided_over_mcp_with_the_approvers_hmac(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    from attested_cortex.service.resources.approvals_api import DecideApproval, canonical_body
    from tests.server.test_pipeline import approval_settings, signed

    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, **approval_settings(tmp_path))
    body = {"namespace": "held/x", "content": "needs a yes"}
    async with mcp_client(cortex) as client:
        held = error(await client.call_tool("memory_store", body))
        assert (held["status"], held["error"]["code"]) == (202, "held_for_approval")
        approval = held["error"]["details"]["approval_id"]
        pending = ok(await client.call_tool("approvals_list", {}))
        assert [a["id"] for a in pending["approvals"]] == [approval]
        decision = {"id": approval, "decision": "approve"}
        unsigned = error(await client.call_tool("approval_decide", {
            **decision, "timestamp": "1", "signature": "sha256=00"}))
        assert (unsigned["status"], unsigned["error"]["code"]) == (
            401, "approval_signature_stale")
        path = f"/v1/approvals/{approval}"
        headers = signed("POST", path, canonical_body(DecideApproval(decision="approve")))
        arguments = {**decision, "timestamp": headers["X-Cortex-Timestamp"],
                     "signature": headers["X-Cortex-Signature"]}
        decided = ok(await client.call_tool("approval_decide", arguments))
        assert decided["status"] == "approved"
        replay = error(await client.call_tool("approval_decide", arguments))
        assert replay["error"]["code"] == "approval_signature_replayed"
    async with mcp_client(cortex, headers={"X-Cortex-Approval": approval}) as client:
        stored = ok(await client.call_tool("memory_store", body))
    assert stored["namespace"] == "held/x" and count_memories(migrated_pg15_dsn) == 1


async def test_quotas_and_audit_hold_for_mcp_calls(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"requests_per_second": 3,
                                       "storage_per_agent_bytes": 100},
                               permissions={"mode": "advisory", "rules": [deny_rule()]})
    async with mcp_client(cortex, agent="dev:busy") as client:
        answers = [await client.call_tool("memory_list", {}) for _ in range(8)]
        limited = [error(r) for r in answers if r.is_error]
        assert limited and all(e["status"] == 429 for e in limited)
        assert all(e["error"]["code"] == "quota_exceeded" and e["error"]["details"]["retry_after"]
                   >= 1 for e in limited)
    async with mcp_client(cortex, agent="dev:writer") as client:
        big = error(await client.call_tool("memory_store", {"namespace": "t",
                                                            "content": "x" * 200}))
        assert (big["status"], big["error"]["code"]) == (413, "storage_quota_exceeded")
        # advisory mode: the rule's denial is let through, and recorded by the audit step
        ok(await client.call_tool("memory_store", {"namespace": "secret/k", "content": "k"}))
    metrics = (await cortex.call("GET", "/metrics")).text
    assert 'cortex_policy_decisions_total{effect="advisory",operation="memory.store",' \
        'source="rule",verdict="deny"} 1.0' in metrics
    assert 'route="/mcp",status="200"' in metrics


#: An initialize of the handshake era, and the Accept header the transport asks for.
HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"}}}
ACCEPT_BOTH = {"Accept": "application/json, text/event-stream"}


async def test_another_origin_is_refused_and_answers_are_single_json(
    cortex: CortexClient,
) -> None:
    hello, accept = HELLO, ACCEPT_BOTH
    evil = await cortex.call("POST", "/mcp", hello,
                             headers={**accept, "Origin": "http://evil.example"})
    assert (evil.status, evil.body["error"]["code"]) == (403, "origin_not_allowed")
    same = await cortex.call("POST", "/mcp", hello,
                             headers={**accept, "Origin": cortex.base})
    assert same.status == 200, same.text
    assert same.headers.getall("Content-Type") == ["application/json"]
    assert same.body["result"]["protocolVersion"] == "2025-11-25"
    assert same.headers["X-Request-Id"]


async def test_a_body_that_is_not_json_is_415_and_one_without_a_type_is_json(
    cortex: CortexClient,
) -> None:
    """As on every route: the SDK answered both with a plain-text 400."""
    hello, accept = HELLO, ACCEPT_BOTH
    for content_type in ("text/plain", "application/json; charset=latin-1"):
        wrong = await cortex.call("POST", "/mcp", hello,
                                  headers={**accept, "Content-Type": content_type})
        assert (wrong.status, wrong.body["error"]["code"]) == (415, "unsupported_media_type")
    async with cortex.session.post(cortex.base + "/mcp", data=json.dumps(hello).encode(),
                                   headers={**accept, "X-Agent-Id": cortex.agent},
                                   skip_auto_headers=["Content-Type"]) as untyped:
        assert "Content-Type" not in untyped.request_info.headers
        assert untyped.status == 200, await untyped.text()
        assert (await untyped.json())["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_leave_no_task_behind(cortex: CortexClient, mode: str) -> None:
    async with mcp_client(cortex, mode=mode) as client:  # warm: the endpoint's own tasks
        ok(await client.call_tool("memory_list", {}))
    before = len(asyncio.all_tasks())
    async with mcp_client(cortex, mode=mode) as client:
        for _ in range(200):
            ok(await client.call_tool("memory_list", {}))
    await await_until(lambda: len(asyncio.all_tasks()) <= before,
                      what="the session's tasks to wind down", seconds=5, interval_s=0.01)


def strings(value: Any) -> list[str]:
    """Every string anywhere in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


async def test_transcripts_stored_cited_and_replayed_over_mcp(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    """transcript_store and memory_replay run the transcript pipeline as the HTTP routes do:
    spans replayed, another agent refused, a closed namespace refused with the same codes."""
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts={
        "enabled": True, "namespaces": [{"namespace": "support/**"}]})
    async with mcp_client(cortex) as client:
        trail = ok(await client.call_tool("transcript_store", {
            "namespace": "support/acme", "content": DIALOGUE}))
        start = DIALOGUE.index("A long analytics query")
        end = DIALOGUE.index("\n", start)
        memory = ok(await client.call_tool("memory_store", {
            "namespace": "support/acme", "content": "the reporting role held the lock",
            "citations": [{"transcript_id": trail["id"], "start": start, "end": end}]}))
        replayed = ok(await client.call_tool("memory_replay", {"memory_id": memory["id"]}))
        http = await cortex.call("GET", f"/v1/memories/{memory['id']}/replay")
        assert replayed == http.body
        assert DIALOGUE[start:end] in strings(replayed)
        whole = ok(await client.call_tool("memory_replay", {"memory_id": memory["id"],
                                                            "full": True}))
        assert DIALOGUE in strings(whole)
        closed = error(await client.call_tool("transcript_store", {
            "namespace": "proj/x", "content": "not kept here"}))
        closed_http = await cortex.call("POST", "/v1/transcripts",
                                        {"namespace": "proj/x", "content": "not kept here"})
        assert (closed["status"], closed["error"]["code"]) == (
            closed_http.status, closed_http.body["error"]["code"]) == (403, "transcripts_disabled")
    async with mcp_client(cortex, agent="dev:mallory") as other:
        refused = error(await other.call_tool("memory_replay", {"memory_id": memory["id"]}))
    assert refused["status"] == 403 and refused["error"]["code"] == "not_owner"
