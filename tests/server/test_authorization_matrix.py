"""The authorization matrix, derived from the live OpenAPI document: every mutating operation
(POST, PUT, PATCH, DELETE) is classified here, and a route nobody classified fails
:func:`test_every_mutating_operation_is_classified` by name.

For each operation agent ``bob`` (every scope a token grants by default, so all write
scopes, but not the owner) attacks agent ``alice``'s objects (memories, the link between
them, her transcript, her approval, her MCP session), over HTTP routes and as MCP tool
calls; each answer is the 4xx docs/permissions.md (and docs/mcp.md) documents,
and alice's objects read back unchanged: content, revision, links, the replay of her
transcript, the approval's state, and the audit chain verifies (deeply) with no record added.
A token without write scopes mutates nothing on any route, and ``X-Agent-Id`` is ignored
under tokens authentication (kubernetes: tests/operator/test_kubernetes_auth.py).

Agents authenticate with real generated tokens (``--auth tokens``) so scopes are real.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import requests
from hack.support.served import CORTEXCTL, serve

from tests.server.test_permissions_api import Agents, agents
from tests.server.test_pipeline import approval_settings, signed
from tests.support.cortex import MakeCortex, Reply

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}

#: Every mutating operation of the OpenAPI document, and what it acts on. ``own``: it
#: creates an object of the caller's (the attack is to reach the victim's through it);
#: ``victim``: it changes an existing object, the owner's alone; ``read``: a POST that
#: writes nothing (a query with a body).
CLASSIFIED: dict[tuple[str, str], str] = {
    ("POST", "/v1/memories"): "own",
    ("POST", "/v1/memories:batch"): "own",
    ("PATCH", "/v1/memories/{id}"): "victim",
    ("DELETE", "/v1/memories/{id}"): "victim",
    ("POST", "/v1/links"): "own",
    ("POST", "/v1/kg/invalidate"): "victim",
    ("POST", "/v1/kg/query"): "read",
    ("POST", "/v1/kg/paths"): "read",
    ("POST", "/v1/recall"): "read",
    ("POST", "/v1/approvals/{id}"): "victim",
    ("POST", "/v1/transcripts"): "own",
    # the spoke-memory family: its writes address records, grants and spaces by id
    ("POST", "/v1/spoke/memory"): "victim",
    # JSON-RPC: each tool call is one of the operations above, through the same pipeline
    ("POST", "/mcp"): "victim",
    # ends an MCP session: the agent's that opened it alone
    ("DELETE", "/mcp"): "victim",
    # a federation peer's changes: its TLS client certificate, never an agent's token
    # (tests/server/test_federation.py: no certificate 401, another peer's 403)
    ("POST", "/v1/federation/changes"): "peer",
    # webhook subscriptions (issue 41) belong to the cortex, no agent: managed with
    # subscriptions.manage held bare, refused to a token without it (below)
    ("POST", "/v1/subscriptions"): "cortex",
    ("PATCH", "/v1/subscriptions/{name}"): "cortex",
    ("DELETE", "/v1/subscriptions/{name}"): "cortex",
    ("POST", "/v1/subscriptions/{name}/replay"): "cortex",
    ("POST", "/v1/subscriptions/{name}/dead-letters/replay"): "cortex",
    ("DELETE", "/v1/subscriptions/{name}/dead-letters"): "cortex",
}

#: The scopes of a token that may read everything but write nothing.
READ_ONLY = "memory.read,graph.read,audit.read"


@dataclass
class World:
    """Alice's objects, and the team of agents."""

    team: Agents
    dsn: str
    memory: dict[str, Any]
    other: dict[str, Any]
    link: dict[str, Any]
    transcript: dict[str, Any]
    approval: str


async def world(make_cortex: MakeCortex, dsn: str, tmp_path: Path) -> World:
    settings = approval_settings(tmp_path)  # enforce, an AskUser rule on held/**, transcripts
    team = await agents(make_cortex, dsn, tmp_path,
                        {"alice": "", "bob": "", "reader": READ_ONLY}, **settings)
    trail = await team.call("alice", "POST", "/v1/transcripts",
                            {"namespace": "proj", "content": "user: hi\nagent: hello there"})
    assert trail.status == 201, trail.text
    memory = (await team.call("alice", "POST", "/v1/memories", {
        "namespace": "proj", "content": "alice's memory", "citations": [
            {"transcript_id": trail.body["id"], "start": 0, "end": 8}]})).body
    other = await team.store("alice", "proj", "alice's second memory")
    link = await team.call("alice", "POST", "/v1/links", {
        "src_id": memory["id"], "dst_id": other["id"], "relation": "related_to"})
    assert link.status == 201, link.text
    held = await team.call("alice", "POST", "/v1/memories", {"namespace": "held/x",
                                                             "content": "needs a yes"})
    assert held.status == 202, held.text
    return World(team, dsn, memory, other, link.body, trail.body,
                 held.body["error"]["details"]["approval_id"])


async def snapshot(w: World) -> dict[str, Any]:
    """Everything alice (and the database) would notice changing."""
    seen: dict[str, Any] = {}
    for key, path in [("memory", f"/v1/memories/{w.memory['id']}"),
                      ("other", f"/v1/memories/{w.other['id']}"),
                      ("links", f"/v1/memories/{w.memory['id']}/links"),
                      ("replay", f"/v1/memories/{w.memory['id']}/replay?full=true"),
                      ("listing", "/v1/memories?namespace=proj")]:
        reply = await w.team.call("alice", "GET", path)
        assert reply.status == 200, (path, reply.text)
        seen[key] = reply.body
    audit = await w.team.call("alice", "GET", "/v1/audit/verify?deep=true")
    assert audit.status == 200 and audit.body["ok"] and audit.body["deep"]["ok"], audit.text
    seen["audit_events"] = audit.body["events"]
    with psycopg.connect(w.dsn) as conn:
        for table in ("memories", "links", "transcripts", "signed_events",
                      "memory_transcript_links", "remembered_rules", "approval_signatures"):
            seen[f"rows:{table}"] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        seen["approval"] = conn.execute(
            "SELECT status, decided_at, consumed_at FROM pending_actions WHERE id = %s",
            (w.approval,)).fetchone()
    return seen


async def send_raw(w: World, who: str, path: str, body: bytes, **headers: str) -> Reply:
    """POST exact bytes (a signed body must be sent as signed)."""
    return await w.team.client.call("POST", path, raw=body, agent=None, headers={
        "Authorization": f"Bearer {w.team.tokens[who]}", **headers})


Attack = Callable[[World, str], Awaitable[list[tuple[Reply, int, set[str]]]]]


async def _attack_store(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    t = w.transcript["id"]
    cite = await w.team.call(who, "POST", "/v1/memories", {
        "namespace": "proj", "content": "mine now",
        "citations": [{"transcript_id": t, "start": 0, "end": 8}]})
    # spending alice's approval on her exact request, as someone else
    spend = await w.team.call(who, "POST", "/v1/memories",
                              {"namespace": "held/x", "content": "needs a yes"},
                              **{"X-Cortex-Approval": w.approval})
    return [(cite, 400, {"unknown_transcript"}), (spend, 403, {"approval_mismatch"})]


async def _attack_store_batch(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    t = w.transcript["id"]
    cite = await w.team.call(who, "POST", "/v1/memories:batch", {"memories": [
        {"namespace": "proj", "content": "mine"},
        {"namespace": "proj", "content": "mine now",
         "citations": [{"transcript_id": t, "start": 0, "end": 8}]}]})
    assert cite.body["error"]["details"]["index"] == 1, cite.text
    spend = await w.team.call(who, "POST", "/v1/memories:batch",
                              {"memories": [{"namespace": "held/x", "content": "needs a yes"}]},
                              **{"X-Cortex-Approval": w.approval})
    return [(cite, 400, {"unknown_transcript"}), (spend, 403, {"approval_mismatch"})]


async def _attack_update(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    path = f"/v1/memories/{w.memory['id']}"
    reply = await w.team.call(who, "PATCH", path, {"content": "bob was here", "tags": ["x"]})
    return [(reply, 403, {"not_owner"})]


async def _attack_delete(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    reply = await w.team.call(who, "DELETE", f"/v1/memories/{w.memory['id']}")
    return [(reply, 403, {"not_owner"})]


async def _attack_link(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    # a client-chosen id that is alice's link: never overwrites it
    reply = await w.team.call(who, "POST", "/v1/links", {
        "id": w.link["id"], "src_id": w.other["id"], "dst_id": w.memory["id"],
        "relation": "contradicts"})
    return [(reply, 409, {"replay"})]


async def _attack_invalidate(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    reply = await w.team.call(who, "POST", "/v1/kg/invalidate", {"link_id": w.link["id"]})
    return [(reply, 403, {"not_owner"})]


async def _attack_decide(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    path = f"/v1/approvals/{w.approval}"
    body = json.dumps({"decision": "approve", "remember": "forever"}).encode()
    unsigned = await send_raw(w, who, path, body)
    forged = await send_raw(w, who, path, body, **signed(
        "POST", path, body, secret=b"not the cortex secret at all"))
    return [(unsigned, 401, {"approval_signature_missing", "unauthenticated"}),
            (forged, 401, {"approval_signature_invalid", "unauthenticated"})]


async def _attack_transcript(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    # a transcript carries no id the client chooses: the attack is an owner field
    reply = await w.team.call(who, "POST", "/v1/transcripts", {
        "namespace": "proj", "content": "x", "owner": "alice"})
    return [(reply, 400, {"invalid_input"})]


async def _attack_federation(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    # an agent's token posing as a peer: this cortex federates with no one, so nothing is
    # there to reach (with peers, no client certificate is 401: tests/server/test_federation)
    reply = await w.team.call(who, "POST", "/v1/federation/changes", {"changes": []},
                              **{"X-Cortex-Peer": "alice"})
    return [(reply, 404, {"federation_off"})]


async def _attack_spoke(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    # alice's memory addressed as a family record, and grants or a freeze of her namespace
    # taken as a space: without a grant or memory.override on it, nothing is found or done
    m, found = w.memory["id"], []
    for name, request in [
        ("memory.records.update", {"record_id": m, "expected_revision": 1,
                                   "content": {"text": "r"}}),
        ("memory.records.delete", {"record_id": m, "expected_revision": 1}),
        ("memory.grants.grant", {"principal_id": who, "capabilities": ["admin"]}),
        ("memory.spaces.freeze", {}),
    ]:
        reply = await w.team.call(who, "POST", "/v1/spoke/memory", {
            "op": name, "request": {"space_id": "proj", **request}})
        found.append((reply, 404 if name != "memory.spaces.freeze" else 403,
                      {"space_not_found", "grant_missing"}))
    return found


MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


async def mcp_session(w: World, who: str) -> dict[str, str]:
    """Open a handshake-era MCP session as ``who``; the headers that use it."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "matrix", "version": "0"}}}
    opened = await w.team.call(who, "POST", "/mcp", hello, **MCP_ACCEPT)
    assert opened.status == 200, opened.text
    session = {**MCP_ACCEPT, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
               "MCP-Protocol-Version": "2025-11-25"}
    done = await w.team.call(who, "POST", "/mcp", {"jsonrpc": "2.0",
                                                   "method": "notifications/initialized"},
                             **session)
    assert done.status == 202, done.text
    return session


async def tool(w: World, who: str, session: dict[str, str], name: str,
               arguments: dict[str, Any]) -> Reply:
    """One tools/call; a tool error as a Reply with its HTTP status and envelope."""
    reply = await w.team.call(who, "POST", "/mcp", {
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}}, **session)
    assert reply.status == 200, reply.text
    result = reply.body["result"]
    if not result.get("isError"):
        return Reply(200, reply.headers, result.get("structuredContent"), reply.text)
    envelope = result["structuredContent"]
    return Reply(envelope["status"], reply.headers, envelope, json.dumps(envelope))


async def _attack_mcp(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    mine = await mcp_session(w, who)
    m, link, t = w.memory["id"], w.link["id"], w.transcript["id"]
    stamp = signed("POST", f"/v1/approvals/{w.approval}", b'{"decision":"approve"}',
                   secret=b"not the cortex secret at all")
    answers = [
        (await tool(w, who, mine, "memory_update", {"id": m, "content": "bob was here"}),
         403, {"not_owner"}),
        (await tool(w, who, mine, "memory_forget", {"id": m}), 403, {"not_owner"}),
        (await tool(w, who, mine, "link_invalidate", {"link_id": link}), 403, {"not_owner"}),
        (await tool(w, who, mine, "memory_replay", {"memory_id": m, "full": True}),
         403, {"not_owner"}),
        (await tool(w, who, mine, "memory_store", {
            "namespace": "proj", "content": "c",
            "citations": [{"transcript_id": t, "start": 0, "end": 8}]}),
         400, {"unknown_transcript"}),
        (await tool(w, who, mine, "approval_decide", {
            "id": w.approval, "decision": "approve",
            "timestamp": stamp["X-Cortex-Timestamp"],
            "signature": stamp["X-Cortex-Signature"]}),
         401, {"approval_signature_invalid"}),
    ]
    # alice's session, presented by someone else, does not exist
    theirs = await mcp_session(w, "alice")
    stolen = await w.team.call(who, "POST", "/mcp", {
        "jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "memory_get", "arguments": {"id": m}}}, **theirs)
    assert stolen.status == 404, stolen.text
    return answers


async def _attack_mcp_end(w: World, who: str) -> list[tuple[Reply, int, set[str]]]:
    theirs = await mcp_session(w, "alice")
    ended = await w.team.call(who, "DELETE", "/mcp", None, **theirs)
    assert ended.status == 404, ended.text  # as if it did not exist
    still = await w.team.call("alice", "POST", "/mcp",
                              {"jsonrpc": "2.0", "id": 9, "method": "ping"}, **theirs)
    assert still.status == 200, still.text  # and alice's session lives on
    return []


ATTACKS: dict[tuple[str, str], Attack] = {
    ("POST", "/mcp"): _attack_mcp,
    ("DELETE", "/mcp"): _attack_mcp_end,
    ("POST", "/v1/memories"): _attack_store,
    ("POST", "/v1/memories:batch"): _attack_store_batch,
    ("PATCH", "/v1/memories/{id}"): _attack_update,
    ("DELETE", "/v1/memories/{id}"): _attack_delete,
    ("POST", "/v1/links"): _attack_link,
    ("POST", "/v1/kg/invalidate"): _attack_invalidate,
    ("POST", "/v1/approvals/{id}"): _attack_decide,
    ("POST", "/v1/transcripts"): _attack_transcript,
    ("POST", "/v1/spoke/memory"): _attack_spoke,
    ("POST", "/v1/federation/changes"): _attack_federation,
}


def check(answers: list[tuple[Reply, int, set[str]]], route: tuple[str, str]) -> None:
    for reply, status, codes in answers:
        assert reply.status == status, (route, reply.status, reply.text)
        assert reply.body["error"]["code"] in codes, (route, reply.text)


async def mutating_operations(w: World) -> set[tuple[str, str]]:
    document = (await w.team.client.call("GET", "/v1/openapi.json", agent=None)).body
    return {(method.upper(), path) for path, item in document["paths"].items()
            for method in item if method.upper() in MUTATING}


async def test_every_mutating_operation_is_classified(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    w = await world(make_cortex, migrated_pg15_dsn, tmp_path)
    live = await mutating_operations(w)
    unclassified = sorted(live - set(CLASSIFIED))
    assert not unclassified, f"classify these mutating operations here: {unclassified}"
    assert not set(CLASSIFIED) - live, "a classified operation left the OpenAPI document"
    assert {k for k, v in CLASSIFIED.items() if v not in ("read", "cortex")} == set(ATTACKS)


async def test_another_agent_changes_nothing_of_the_owners(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    w = await world(make_cortex, migrated_pg15_dsn, tmp_path)
    before = await snapshot(w)
    for route in sorted(await mutating_operations(w)):
        if CLASSIFIED[route] in ("read", "cortex"):
            continue
        check(await ATTACKS[route](w, "bob"), route)
        assert await snapshot(w) == before, f"{route}: bob changed alice's objects"


async def test_another_agent_cannot_replay_or_cite_the_owners_transcript(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    w = await world(make_cortex, migrated_pg15_dsn, tmp_path)
    for query in ("", "?full=true", "?full=false"):
        replay = await w.team.call("bob", "GET", f"/v1/memories/{w.memory['id']}/replay{query}")
        assert replay.status == 403 and replay.body["error"]["code"] == "not_owner", replay.text
        assert "hello there" not in replay.text and "user: hi" not in replay.text
    # nor through a memory of his own that cites her transcript (refused at the store)
    cite = await w.team.call("bob", "POST", "/v1/memories", {
        "namespace": "proj", "content": "c", "citations": [
            {"transcript_id": w.transcript["id"], "start": 0, "end": 8}]})
    assert cite.status == 400 and cite.body["error"]["code"] == "unknown_transcript", cite.text
    # the owner still can
    mine = await w.team.call("alice", "GET", f"/v1/memories/{w.memory['id']}/replay?full=true")
    assert mine.status == 200 and mine.body["citations"][0]["text"] == "user: hi"


async def test_a_token_without_write_scopes_mutates_nothing(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    w = await world(make_cortex, migrated_pg15_dsn, tmp_path)
    before = await snapshot(w)
    m, other, link = w.memory["id"], w.other["id"], w.link["id"]
    body = json.dumps({"decision": "approve"}).encode()
    attempts: dict[tuple[str, str], tuple[str, Any, dict[str, str]]] = {
        ("POST", "/v1/memories"): ("/v1/memories", {"namespace": "proj", "content": "r"}, {}),
        ("POST", "/v1/memories:batch"): (
            "/v1/memories:batch", {"memories": [{"namespace": "proj", "content": "r"}]}, {}),
        ("PATCH", "/v1/memories/{id}"): (f"/v1/memories/{m}", {"content": "r"}, {}),
        ("DELETE", "/v1/memories/{id}"): (f"/v1/memories/{m}", None, {}),
        ("POST", "/v1/links"): ("/v1/links", {"src_id": m, "dst_id": other,
                                              "relation": "supersedes"}, {}),
        ("POST", "/v1/kg/invalidate"): ("/v1/kg/invalidate", {"link_id": link}, {}),
        ("POST", "/v1/transcripts"): ("/v1/transcripts", {"namespace": "proj",
                                                          "content": "r"}, {}),
        ("POST", "/v1/spoke/memory"): ("/v1/spoke/memory", {
            "op": "memory.records.delete", "request": {
                "space_id": "proj", "record_id": m, "expected_revision": 1}}, {}),
        # even validly signed: deciding needs the approvals.decide scope as well
        ("POST", "/v1/approvals/{id}"): (
            f"/v1/approvals/{w.approval}", None,
            signed("POST", f"/v1/approvals/{w.approval}", body)),
        ("POST", "/v1/subscriptions"): ("/v1/subscriptions", {
            "name": "leak", "url": "http://127.0.0.1:9/h", "events": ["*"],
            "allow_private_targets": True}, {}),
        ("PATCH", "/v1/subscriptions/{name}"): ("/v1/subscriptions/x", {"enabled": False}, {}),
        ("DELETE", "/v1/subscriptions/{name}"): ("/v1/subscriptions/x", None, {}),
        ("POST", "/v1/subscriptions/{name}/replay"): (
            "/v1/subscriptions/x/replay", {"from_sequence": 1}, {}),
        ("POST", "/v1/subscriptions/{name}/dead-letters/replay"): (
            "/v1/subscriptions/x/dead-letters/replay", {}, {}),
        ("DELETE", "/v1/subscriptions/{name}/dead-letters"): (
            "/v1/subscriptions/x/dead-letters", None, {}),
    }
    live = {r for r in await mutating_operations(w) if CLASSIFIED[r] not in ("read", "peer")}
    assert set(attempts) | {("POST", "/mcp"), ("DELETE", "/mcp")} == live, \
        "a mutating route was added: attempt it here"
    # the same writes as MCP tools
    session = await mcp_session(w, "reader")
    stamp = signed("POST", f"/v1/approvals/{w.approval}", b'{"decision":"approve"}')
    for name, arguments in [
        ("memory_store", {"namespace": "proj", "content": "r"}),
        ("memory_store_batch", {"memories": [{"namespace": "proj", "content": "r"}]}),
        ("memory_update", {"id": m, "content": "r"}),
        ("memory_forget", {"id": m}),
        ("link_create", {"src_id": m, "dst_id": other, "relation": "supersedes"}),
        ("link_invalidate", {"link_id": link}),
        ("transcript_store", {"namespace": "proj", "content": "r"}),
        ("spoke_memory", {"op": "memory.records.delete", "request": {
            "space_id": "proj", "record_id": m, "expected_revision": 1}}),
        ("subscription_create", {"name": "leak", "url": "http://127.0.0.1:9/h",
                                 "events": ["*"], "allow_private_targets": True}),
        ("subscription_update", {"name": "x", "enabled": False}),
        ("subscription_delete", {"name": "x"}),
        ("subscription_replay", {"name": "x", "from_sequence": 1}),
        ("dead_letters_replay", {"name": "x"}),
        ("dead_letters_purge", {"name": "x"}),
        ("approval_decide", {"id": w.approval, "decision": "approve",
                             "timestamp": stamp["X-Cortex-Timestamp"],
                             "signature": stamp["X-Cortex-Signature"]}),
    ]:
        reply = await tool(w, "reader", session, name, arguments)
        assert reply.status == 403, (name, reply.text)
        assert reply.body["error"]["code"] == "scope_denied", (name, reply.text)
        assert await snapshot(w) == before, f"MCP {name}: a read-only token changed something"
    # ending its own session is not a write of anyone's data
    ended = await w.team.call("reader", "DELETE", "/mcp", None, **session)
    assert ended.status in (200, 204), ended.text
    for route, (path, payload, headers) in sorted(attempts.items()):
        if route == ("POST", "/v1/approvals/{id}"):
            reply = await send_raw(w, "reader", path, body, **headers)
        else:
            reply = await w.team.call("reader", route[0], path, payload)
        assert reply.status == 403, (route, reply.text)
        assert reply.body["error"]["code"] == "scope_denied", (route, reply.text)
        assert await snapshot(w) == before, f"{route}: a read-only token changed something"
    # the read-side POSTs still answer it
    for path, payload in [("/v1/recall", {"query": "alice"}),
                          ("/v1/kg/query", {"start_id": m, "depth": 1}),
                          ("/v1/kg/paths", {"src_id": m, "dst_id": other})]:
        assert (await w.team.call("reader", "POST", path, payload)).status == 200
    assert await snapshot(w) == before


async def test_x_agent_id_is_ignored_under_tokens_auth(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    w = await world(make_cortex, migrated_pg15_dsn, tmp_path)
    before = await snapshot(w)
    path = f"/v1/memories/{w.memory['id']}"
    alone = await w.team.client.call("PATCH", path, {"content": "spoofed"}, agent="alice")
    assert alone.status == 401 and alone.body["error"]["code"] == "unauthenticated", alone.text
    # bob's token with alice's name beside it is still bob
    spoof = await w.team.call("bob", "PATCH", path, {"content": "spoofed"},
                              **{"X-Agent-Id": "alice"})
    assert spoof.status == 403 and spoof.body["error"]["code"] == "not_owner", spoof.text
    mine = await w.team.call("bob", "POST", "/v1/memories", {"namespace": "proj",
                                                              "content": "who am i"},
                             **{"X-Agent-Id": "alice"})
    assert mine.status == 201 and mine.body["author"] == "bob", mine.text
    after = await snapshot(w)
    assert after.pop("rows:memories") != before.pop("rows:memories")
    for key in ("listing", "rows:signed_events", "audit_events"):
        after.pop(key), before.pop(key)
    assert after == before


def test_the_real_cli_and_server_ignore_x_agent_id(migrated_pg15_dsn: str,
                                                    tmp_path: Path) -> None:
    """``cortexctl tokens generate`` and ``cortexctl serve --auth tokens`` as processes:
    bob's token beside alice's name writes as bob, and cannot touch alice's memory."""
    tokens_file = tmp_path / "tokens"
    tokens = {}
    for who in ("alice", "bob"):
        made = subprocess.run([*CORTEXCTL, "tokens", "generate", "--agent-id", who,
                               "--tokens-file", str(tokens_file)],
                              check=True, capture_output=True, text=True, timeout=60)
        tokens[who] = made.stdout.strip()
    with serve(migrated_pg15_dsn, tmp_path, "--auth", "tokens", "--tokens-file",
               str(tokens_file)) as served, requests.Session() as http:
        def call(who: str, method: str, path: str, body: Any = None) -> requests.Response:
            return http.request(method, served.base + path, json=body, timeout=30, headers={
                "Authorization": f"Bearer {tokens[who]}", "X-Agent-Id": "alice"})

        mine = call("alice", "POST", "/v1/memories", {"namespace": "n", "content": "a"})
        assert mine.status_code == 201 and mine.json()["author"] == "alice"
        path = f"/v1/memories/{mine.json()['id']}"
        spoof = call("bob", "PATCH", path, {"content": "b"})
        assert spoof.status_code == 403 and spoof.json()["error"]["code"] == "not_owner"
        theirs = call("bob", "POST", "/v1/memories", {"namespace": "n", "content": "b"})
        assert theirs.status_code == 201 and theirs.json()["author"] == "bob"
        alone = http.get(served.base + path, headers={"X-Agent-Id": "alice"}, timeout=30)
        assert alone.status_code == 401
        assert call("alice", "GET", path).json()["content"] == "a"
