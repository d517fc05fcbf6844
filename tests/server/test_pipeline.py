"""The declared operation pipeline: every route runs one declared operation through every
step, every fired hook payload matches its documented schema, and a Deny on a read's post-
event withholds the results.

An operation added without a descriptor (a route whose service never calls
``pipeline.run``) leaves no trace and fails :func:`test_every_route_runs_every_step`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema_rs
import yaml
from hack.support.waiting import await_until

from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.hooks.events import EVENTS
from attested_cortex.hooks.payload_schemas import schema_for
from attested_cortex.policy.signatures import sign
from attested_cortex.server.middleware import PEER_PATHS, PUBLIC_PATHS
from attested_cortex.service.pipeline.operations import OPERATIONS
from attested_cortex.service.pipeline.running import STEPS
from attested_cortex.types import AgentId
from tests.server.test_hooks_api import RECORDER, recorded
from tests.support.cortex import CortexClient, MakeCortex, Reply

SECRET = b"0123456789abcdef0123456789abcdef"
HELD = {"source": "t/held", "namespace": "held/**", "agents": ["*"], "operations": ["store"],
        "decision": "ask_user", "reason": "a human looks at held/ first"}
# The server's public paths run no pipeline (health, metrics, the federation keyring, the
# secret-free delivery report); a peer's changes need its mTLS client certificate and are
# exercised (through the pipeline's memory ops) by tests/server/test_federation.py.
PUBLIC = PUBLIC_PATHS | PEER_PATHS


def approval_settings(tmp_path: Path) -> dict[str, Any]:
    """Enforce mode, one AskUser rule, the approval API on (and transcripts, so every route
    can run)."""
    (tmp_path / "secret").write_bytes(SECRET)
    return {"permissions": {"mode": "enforce", "rules": [HELD]},
            "approval": {"hmac_secret_file": tmp_path / "secret"},
            "transcripts": {"enabled": True},
            # one attempt: the subscription routes' event is dead-lettered at once
            "subscriptions": {"max_attempts": 1, "connect_timeout_ms": 200}}


def signer_settings(tmp_path: Path) -> dict[str, Any]:
    """:func:`approval_settings` and an audit signer (the audit tree's routes need one)."""
    if not (tmp_path / "keys" / "audit").exists():
        write_identity(tmp_path / "keys" / "audit", generate_key(AgentId("cortex:audit")))
    return {**approval_settings(tmp_path), "keys_dir": tmp_path / "keys",
            "audit_signer": "cortex:audit"}


def signed(method: str, path: str, body: bytes, *, at: float | None = None,
           secret: bytes = SECRET) -> dict[str, str]:
    stamp = str(int(time.time() if at is None else at))
    mac = sign(secret, timestamp=stamp, method=method, path=path, body=body)
    return {"X-Cortex-Timestamp": stamp, "X-Cortex-Signature": f"sha256={mac}"}


async def first_event_line(client: CortexClient) -> str:
    async with client.session.get(client.base + "/v1/approvals/stream",
                                  headers={"X-Agent-Id": client.agent}) as response:
        assert response.status == 200, await response.text()
        return (await response.content.readline()).decode()


def tracing(client: CortexClient) -> list[tuple[str, str]]:
    trace: list[tuple[str, str]] = []
    # Services is frozen for the server's code; the test installs its observer once, before
    # any request, on the one object the app holds.
    object.__setattr__(client.services, "observe", lambda op, step: trace.append((op, step)))
    return trace


def runs(trace: list[tuple[str, str]]) -> list[tuple[str, tuple[str, ...]]]:
    """The trace cut into one (operation, steps) entry per pipeline run."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for op, step in trace:
        if step == "authenticate":
            found.append((op, ()))
        found[-1] = (op, (*found[-1][1], step))
    return found


async def exercise(client: CortexClient) -> dict[tuple[str, str], Any]:
    """Call every route once with valid input; answers by (method, route)."""
    a = await client.store("proj", "alpha memory")
    b = await client.store("proj", "beta memory")
    calls: list[tuple[str, str, str, Any]] = [
        ("POST", "/v1/memories", "/v1/memories", {"namespace": "proj", "content": "gamma"}),
        ("POST", "/v1/memories:batch", "/v1/memories:batch",
         {"memories": [{"namespace": "proj", "content": "delta"}]}),
        ("GET", "/v1/memories", "/v1/memories?namespace=proj", None),
        ("GET", "/v1/memories/{id}", f"/v1/memories/{a['id']}", None),
        ("PATCH", "/v1/memories/{id}", f"/v1/memories/{a['id']}", {"title": "t"}),
        ("GET", "/v1/memories/{id}/verify", f"/v1/memories/{a['id']}/verify", None),
        ("POST", "/v1/recall", "/v1/recall", {"query": "alpha"}),
        ("POST", "/v1/links", "/v1/links", {"src_id": a["id"], "dst_id": b["id"],
                                            "relation": "related_to"}),
        ("GET", "/v1/memories/{id}/links", f"/v1/memories/{a['id']}/links", None),
        ("POST", "/v1/kg/query", "/v1/kg/query", {"start_id": a["id"], "depth": 1}),
        ("POST", "/v1/kg/paths", "/v1/kg/paths", {"src_id": a["id"], "dst_id": b["id"]}),
        ("GET", "/v1/kg/timeline", f"/v1/kg/timeline?memory_id={a['id']}", None),
        ("GET", "/v1/audit/verify", "/v1/audit/verify", None),
        ("GET", "/v1/audit/checkpoint", "/v1/audit/checkpoint", None),
        ("GET", "/v1/audit/proof", "/v1/audit/proof?seq=1", None),
        ("GET", "/v1/audit/consistency", "/v1/audit/consistency?from=1", None),
        ("GET", "/v1/export", "/v1/export", None),
        ("GET", "/v1/capabilities", "/v1/capabilities", None),
        ("GET", "/v1/federation/quarantine", "/v1/federation/quarantine", None),
        ("GET", "/v1/memories/{id}/provenance", f"/v1/memories/{a['id']}/provenance", None),
        ("POST", "/v1/spoke/memory", "/v1/spoke/memory", {"op": "memory.describe"}),
    ]
    answers: dict[tuple[str, str], Any] = {}
    for method, route, path, body in calls:
        answers[(method, route)] = await client.call(method, path, body)
    trail = await client.call("POST", "/v1/transcripts",
                              {"namespace": "proj", "content": "user: hi\nagent: hello"})
    answers[("POST", "/v1/transcripts")] = trail
    cited = await client.store("proj", "greeted", citations=[
        {"transcript_id": trail.body["id"], "start": 0, "end": 8}])
    answers[("GET", "/v1/memories/{id}/replay")] = await client.call(
        "GET", f"/v1/memories/{cited['id']}/replay")
    link = answers[("POST", "/v1/links")].body
    answers[("GET", "/v1/links/{id}/verify")] = await client.call(
        "GET", f"/v1/links/{link['id']}/verify")
    answers[("POST", "/v1/kg/invalidate")] = await client.call(
        "POST", "/v1/kg/invalidate", {"link_id": link["id"]})
    answers[("DELETE", "/v1/memories/{id}")] = await client.call(
        "DELETE", f"/v1/memories/{b['id']}")
    held_body = {"namespace": "held/x", "content": "needs a yes"}
    held = await client.call("POST", "/v1/memories", held_body)
    assert held.status == 202, held.text
    approval = held.body["error"]["details"]["approval_id"]
    answers[("GET", "/v1/approvals")] = await client.call("GET", "/v1/approvals")
    decide = json.dumps({"decision": "approve"}).encode()
    path = f"/v1/approvals/{approval}"
    answers[("POST", "/v1/approvals/{id}")] = await client.call(
        "POST", path, raw=decide, headers=signed("POST", path, decide))
    done = await client.call("POST", "/v1/memories", held_body,
                             headers={"X-Cortex-Approval": approval})
    assert done.status == 201, done.text
    assert (await first_event_line(client)).startswith(": subscribed")
    answers[("GET", "/v1/approvals/stream")] = done
    answers.update(await exercise_subscriptions(client))
    answers.update(await exercise_mcp(client))
    return answers


async def exercise_subscriptions(client: CortexClient) -> dict[tuple[str, str], Any]:
    """/v1/subscriptions (issue 41): a subscription to a closed loopback port (allowed), so
    its one event is dead-lettered and every dead-letter route has one to act on."""
    base = "/v1/subscriptions/{name}"
    answers: dict[tuple[str, str], Any] = {}
    answers[("POST", "/v1/subscriptions")] = made = await client.call(
        "POST", "/v1/subscriptions", {"name": "hook", "url": "http://127.0.0.1:9/h",
                                      "events": ["post_store"], "allow_private_targets": True})
    answers[("GET", "/v1/subscriptions")] = await client.call("GET", "/v1/subscriptions")
    answers[("GET", base)] = await client.call("GET", "/v1/subscriptions/hook")
    answers[("PATCH", base)] = await client.call("PATCH", "/v1/subscriptions/hook",
                                                 {"max_in_flight": 2})
    await client.store("proj", "for the hook")

    async def buried() -> Any:
        found = await client.call("GET", "/v1/subscriptions/hook/dead-letters")
        return found.body["dead_letters"] and found

    listed = await await_until(buried, seconds=20, what="a dead letter")
    answers[("GET", base + "/dead-letters")] = listed
    seq = listed.body["dead_letters"][0]["sequence"]
    answers[("GET", base + "/dead-letters/{seq}")] = await client.call(
        "GET", f"/v1/subscriptions/hook/dead-letters/{seq}")
    answers[("POST", base + "/dead-letters/replay")] = await client.call(
        "POST", "/v1/subscriptions/hook/dead-letters/replay", {"sequence": seq})
    answers[("DELETE", base + "/dead-letters")] = await client.call(
        "DELETE", "/v1/subscriptions/hook/dead-letters")
    answers[("POST", base + "/replay")] = await client.call(
        "POST", "/v1/subscriptions/hook/replay", {"from_sequence": seq})
    answers[("DELETE", base)] = await client.call("DELETE", "/v1/subscriptions/hook")
    assert made.status == 201, made.text
    return answers


async def exercise_mcp(client: CortexClient) -> dict[tuple[str, str], Any]:
    """/mcp's three methods at the HTTP level (tests/mcp drive its tools with the SDK):
    an initialize opens a session, its GET stream answers, DELETE ends it."""
    accept = {"Accept": "application/json, text/event-stream", "X-Agent-Id": client.agent}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    opened = await client.call("POST", "/mcp", hello, headers=accept)
    session = {**accept, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
               "MCP-Protocol-Version": "2025-11-25"}
    async with client.session.get(client.base + "/mcp", headers=session) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        streamed = Reply(stream.status, stream.headers, None, "")
    ended = await client.call("DELETE", "/mcp", headers=session)
    return {("POST", "/mcp"): opened, ("GET", "/mcp"): streamed, ("DELETE", "/mcp"): ended}


async def test_every_route_runs_every_step(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               **signer_settings(tmp_path))
    app = client.extra["app"]
    routes = {(r.method, r.resource.canonical) for r in app.router.routes()
              if r.method != "HEAD" and r.resource.canonical not in PUBLIC}
    trace = tracing(client)
    answers = await exercise(client)
    assert set(answers) == routes, "a route was added: exercise it here"
    for key, reply in answers.items():
        assert reply.status < 300, (key, reply.text)
    seen_ops: set[str] = set()
    for op, steps in runs(trace):
        if steps == STEPS:
            seen_ops.add(op)
        else:  # a refused request (the held store) stops early, but is always audited
            assert steps == (*STEPS[:len(steps) - 1], "audit"), (op, steps)
    # the spoke-memory ops past describe: tests/spoke/test_dispatch_api.py (they need grants)
    wanted = {op for op in OPERATIONS if not op.startswith("spoke.")} | {
        "spoke.memory.describe"}
    assert seen_ops == wanted, wanted - seen_ops


async def test_every_fired_payload_matches_its_documented_schema(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    # the spoke-memory writes need grants: tests/spoke/test_hooks_audit.py checks theirs
    events = sorted(set(EVENTS) - {"pre_spoke_write", "post_spoke_write"})
    hook = {"name": "recorder", "events": events, "mode": "daemon",
            "command": [sys.executable, RECORDER], "timeout_ms": 1000,
            "env": {"RECORD_FILE": str(tmp_path / "record.jsonl")}}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path,
                               graph_backend="CTE", **signer_settings(tmp_path))
    await exercise(client)
    seen = recorded(tmp_path)
    assert {r["event"] for r in seen} == set(events)
    for record in seen:
        validator = jsonschema_rs.validator_for(schema_for(record["event"]))
        errors = [str(e) for e in validator.iter_errors(record["payload"])]
        assert not errors, (record["event"], errors, record["payload"])
    by_event = {r["event"]: r["payload"] for r in seen}
    assert by_event["pre_update"]["changes"] == {"title": "t"}
    assert by_event["post_recall"]["query"] == "alpha"
    assert by_event["post_recall"]["results"][0]["score"] > 0
    assert by_event["pre_index"]["reason"] in ("store", "update")


async def test_post_recall_deny_withholds_the_results(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = {"name": "gate", "events": ["post_recall", "post_search", "post_kg_query"],
            "mode": "daemon", "command": [sys.executable, RECORDER], "timeout_ms": 1000,
            "env": {"RECORD_FILE": str(tmp_path / "record.jsonl"),
                    "RECORDER_ANSWER": '{"decision": "deny", "reason": "classified"}'}}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path)
    secret = await client.store("proj", "the launch code is 0000")
    for method, path_, body in [("POST", "/v1/recall", {"query": "launch code"}),
                                ("GET", "/v1/memories?namespace=proj", None),
                                ("POST", "/v1/kg/query", {"start_id": secret["id"]})]:
        reply = await client.call(method, path_, body)
        assert reply.status == 403, reply.text
        assert "0000" not in reply.text
        assert reply.body["error"]["details"]["withheld"] is True
    # the hook saw the results it withheld: the operation did run
    assert any(r["payload"].get("results") for r in recorded(tmp_path)
               if r["event"] == "post_recall")
