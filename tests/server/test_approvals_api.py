"""Approvals through HTTP: hold, decide (HMAC), complete exactly once, remember, expire,
stream; forged, stale, future and replayed signatures; the API off without a secret."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import cbor2
import psycopg
from hack.support.waiting import await_until

from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.types import AgentId
from tests.server.test_hooks_api import count_memories
from tests.server.test_pipeline import HELD, SECRET, approval_settings, signed
from tests.support.cortex import CortexClient, MakeCortex, Reply

BODY = {"namespace": "held/x", "content": "needs a yes"}


async def hold(client: CortexClient, body: dict[str, Any] = BODY) -> str:
    reply = await client.call("POST", "/v1/memories", body)
    assert reply.status == 202, reply.text
    assert reply.headers["Location"].endswith(reply.body["error"]["details"]["approval_id"])
    return str(reply.body["error"]["details"]["approval_id"])


async def decide(client: CortexClient, approval: str, decision: str = "approve",
                 compact: bool = False, **more: Any) -> Reply:
    """A signed decision (``compact`` changes the bytes, so the signature differs)."""
    separators = (",", ":") if compact else (", ", ": ")
    body = json.dumps({"decision": decision, **more}, separators=separators).encode()
    path = f"/v1/approvals/{approval}"
    return await client.call("POST", path, raw=body, headers=signed("POST", path, body))


async def server(make_cortex: MakeCortex, dsn: str, tmp_path: Path, **more: Any) -> CortexClient:
    settings = approval_settings(tmp_path)
    settings["approval"].update(more)
    return await make_cortex(dsn, migrated=False, **settings)


async def test_held_then_approved_then_completed_exactly_once_across_two_servers(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    one = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    two = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(one)
    assert count_memories(migrated_pg15_dsn) == 0
    listed = (await two.call("GET", "/v1/approvals")).body["approvals"]
    assert [a["id"] for a in listed] == [approval] and listed[0]["request"]["content"] == \
        BODY["content"]
    early = await two.call("POST", "/v1/memories", BODY, headers={"X-Cortex-Approval": approval})
    assert early.status == 409  # not approved yet
    decided = await decide(one, approval)
    assert decided.status == 200 and decided.body["status"] == "approved"
    again = await decide(two, approval, compact=True)  # a second, validly signed approval
    assert again.status == 409 and again.body["error"]["code"] == "already_decided"
    other = await two.call("POST", "/v1/memories", {**BODY, "content": "something else"},
                           headers={"X-Cortex-Approval": approval})
    assert other.status == 403 and other.body["error"]["code"] == "approval_mismatch"
    results = await asyncio.gather(*(
        c.call("POST", "/v1/memories", BODY, headers={"X-Cortex-Approval": approval})
        for c in (one, two, one, two)))
    assert sorted(r.status for r in results) == [201, 409, 409, 409]
    assert count_memories(migrated_pg15_dsn) == 1
    assert (await one.call("GET", "/v1/approvals")).body["approvals"] == []


async def test_rejected_is_never_written(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    assert (await decide(client, approval, "reject")).body["status"] == "rejected"
    retry = await client.call("POST", "/v1/memories", BODY,
                              headers={"X-Cortex-Approval": approval})
    assert retry.status == 409 and count_memories(migrated_pg15_dsn) == 0


async def test_remember_forever_persists_an_allow_rule_every_server_loads(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    one = await server(make_cortex, migrated_pg15_dsn, tmp_path, sweep_interval_seconds=0.1)
    two = await server(make_cortex, migrated_pg15_dsn, tmp_path, sweep_interval_seconds=0.1)
    approval = await hold(one)
    assert (await decide(one, approval, remember="forever")).body["remember"] is True
    summary = (await one.call("GET", "/v1/capabilities")).body["permissions"]["rule_summary"]
    assert summary[0] == (f"[1000] allow store in held/x (no inherit) for dev:tester "
                          f"(approval/{approval}): remembered approval")
    assert (await one.call("POST", "/v1/memories", {**BODY, "content": "2"})).status == 201
    async def stored_by_two() -> bool:
        return (await two.call("POST", "/v1/memories", {**BODY, "content": "3"})).status == 201

    await await_until(stored_by_two, what="server two to load the remembered rule", seconds=10,
                      interval_s=0.1)
    # remembered for this agent and namespace only
    assert (await one.call("POST", "/v1/memories", BODY, agent="dev:other")).status == 202
    assert (await one.call("POST", "/v1/memories", {"namespace": "held/y",
                                                    "content": "c"})).status == 202


async def test_bad_signatures_are_401(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    path = f"/v1/approvals/{approval}"
    body = json.dumps({"decision": "approve"}).encode()
    now = time.time()
    cases = {
        "forged": signed("POST", path, body, secret=b"not-the-secret-at-all!"),
        "stale": signed("POST", path, body, at=now - 301),
        "future": signed("POST", path, body, at=now + 61),
        "other body": signed("POST", path, b'{"decision": "reject"}'),
        "other path": signed("POST", path + "x", body),
        "missing": {},
        "not hex": {"X-Cortex-Timestamp": str(int(now)), "X-Cortex-Signature": "sha256=zz"},
    }
    for name, headers in cases.items():
        reply = await client.call("POST", path, raw=body, headers=headers)
        assert reply.status == 401, (name, reply.text)
    good = signed("POST", path, body)
    assert (await client.call("POST", path, raw=body, headers=good)).status == 200
    replay = await client.call("POST", path, raw=body, headers=good)
    assert replay.status == 401
    assert replay.body["error"]["code"] == "approval_signature_replayed"
    assert SECRET.decode() not in replay.text


async def test_without_a_secret_the_api_is_off_and_ask_user_is_403(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               permissions={"mode": "enforce", "rules": [HELD]})
    caps = (await client.call("GET", "/v1/capabilities")).body
    assert caps["approval"]["enabled"] is False
    refused = await client.call("POST", "/v1/memories", BODY)
    assert refused.status == 403 and refused.body["error"]["code"] == "approval_required"
    for method, path in [("GET", "/v1/approvals"), ("GET", "/v1/approvals/stream"),
                         ("POST", f"/v1/approvals/{'0' * 8}-0000-0000-0000-{'0' * 12}")]:
        reply = await client.call(method, path, {"decision": "approve"}
                                  if method == "POST" else None)
        assert reply.status == 404 and reply.body["error"]["code"] == "approvals_disabled"


@asynccontextmanager
async def events(client: CortexClient) -> Any:
    session = aiohttp.ClientSession()
    response = await session.get(client.base + "/v1/approvals/stream",
                                 headers={"X-Agent-Id": "dev:approver"})
    assert response.status == 200
    assert (await response.content.readline()).startswith(b": subscribed")

    async def next_event() -> tuple[str, dict[str, Any]]:
        kind, data = "", ""
        async with asyncio.timeout(10):
            while True:
                line = (await response.content.readline()).decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif not line and kind:
                    return kind, json.loads(data)

    try:
        yield next_event
    finally:
        response.close()
        await session.close()


async def test_stream_delivers_created_decided_and_expired_from_any_server(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    one = await server(make_cortex, migrated_pg15_dsn, tmp_path, timeout_seconds=1,
                       sweep_interval_seconds=0.1)
    two = await server(make_cortex, migrated_pg15_dsn, tmp_path, timeout_seconds=1,
                       sweep_interval_seconds=0.1)
    async with events(two) as next_event:
        decided = await hold(one)
        kind, action = await next_event()
        assert (kind, action["id"], action["status"]) == ("created", decided, "pending")
        await decide(one, decided)
        kind, action = await next_event()
        assert (kind, action["id"], action["status"]) == ("decided", decided, "approved")
        expiring = await hold(one)
        kind, action = await next_event()
        assert (kind, action["id"]) == ("created", expiring)
        kind, action = await next_event()  # nobody decides: the sweeper expires it
        assert (kind, action["id"], action["status"]) == ("expired", expiring, "expired")
    late = await decide(one, expiring, compact=True)
    assert late.status == 409 and late.body["error"]["details"]["status"] == "expired"
    retry = await one.call("POST", "/v1/memories", BODY, headers={"X-Cortex-Approval": expiring})
    assert retry.status == 409 and count_memories(migrated_pg15_dsn) == 0


async def test_decisions_and_expiries_are_signed_into_the_audit_chain(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    write_identity(keys / "cortex", generate_key(AgentId("cortex:policy")))
    settings = approval_settings(tmp_path)
    settings["approval"].update(timeout_seconds=1, sweep_interval_seconds=0.1)
    client = await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                               audit_signer="cortex:policy", **settings)
    rejected = await hold(client)
    await decide(client, rejected, "reject")
    expiring = await hold(client)

    def chained() -> list[tuple[str, bytes]]:
        with psycopg.connect(migrated_pg15_dsn) as conn:
            return conn.execute("SELECT event_type, payload FROM signed_events "
                                "ORDER BY sequence").fetchall()

    def expired() -> list[tuple[str, bytes]] | None:
        rows = chained()
        return rows if any(kind == "policy.expired" for kind, _ in rows) else None

    rows = await await_until(expired, what="the sweeper to record the expiry", seconds=10,
                             interval_s=0.1)
    events = [(kind, cbor2.loads(payload)) for kind, payload in rows]
    by_approval = {(e.get("approval_id"), k) for k, e in events}
    assert (rejected, "policy.rejected") in by_approval
    assert (expiring, "policy.expired") in by_approval
    assert all(e["actor"] == "dev:tester" for _, e in events)
    assert (await client.call("GET", "/v1/audit/verify")).body["ok"] is True
