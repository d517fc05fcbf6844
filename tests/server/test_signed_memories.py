"""Agent-signed memory writes over HTTP (issue 13): an agent holding its own key signs a store
or an update, the server verifies and records it like a signed link, and
``GET /v1/memories/{id}/verify`` recomputes the payload from the row."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from attested_cortex.attest.keyfiles import PRIVATE_FILE, write_identity
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import memory_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex

SIGNER = "dev:agent-b"  # Agent custody: only its public key is mounted


@pytest.fixture
def key() -> AgentKey:
    return generate_key(AgentId(SIGNER))


@pytest.fixture
async def served(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
                 key: AgentKey) -> CortexClient:
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId("dev:tester")))
    write_identity(keys / "agent-b", key)
    (keys / "agent-b" / PRIVATE_FILE).unlink()
    return await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                             graph_backend="CTE")


def signed_body(key: AgentKey, *, namespace: str = "kb", title: str = "", content: str,
                at: datetime | None = None) -> dict[str, Any]:
    """What an agent does on its side: sign the state after the write."""
    moment = (at or datetime.now(UTC)).replace(microsecond=0)
    payload = memory_payload(namespace=namespace, title=title, content=content,
                             author=key.agent_id, signed_at=moment)
    return {"namespace": namespace, "title": title, "content": content,
            "signed_at": moment.isoformat(),
            "signature": base64.b64encode(sign(key, payload.encode())).decode()}


def events(client: CortexClient, event_type: str) -> int:
    with psycopg.connect(client.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM signed_events WHERE event_type = %s",
                           (event_type,)).fetchone()
    assert row is not None
    return int(row[0])


async def verify(client: CortexClient, memory_id: str) -> dict[str, Any]:
    reply = await client.call("GET", f"/v1/memories/{memory_id}/verify")
    assert reply.status == 200, reply.text
    return dict(reply.body)


async def test_signed_store_verifies_and_is_in_the_chain(served: CortexClient,
                                                         key: AgentKey) -> None:
    reply = await served.call("POST", "/v1/memories", signed_body(key, content="signed fact"),
                              agent=SIGNER)
    assert reply.status == 201, reply.text
    check = await verify(served, reply.body["id"])
    assert (check["signature_verified"], check["attest_level"], check["signed_by"]) == (
        True, "peer_attested", SIGNER)
    assert check["key_fingerprint"] == key.public.fingerprint
    assert events(served, "memory.signed") == 1
    audit = (await served.call("GET", "/v1/audit/verify?deep=true")).body
    assert audit["ok"] and audit["signatures_checked"] >= 1


async def test_unsigned_store_verifies_false(served: CortexClient) -> None:
    stored = await served.store("kb", "plain")
    check = await verify(served, stored["id"])
    assert (check["signature_verified"], check["attest_level"], check["reason"]) == (
        False, "unsigned", "unsigned")


async def test_bad_signature_is_400_and_writes_nothing(served: CortexClient,
                                                       key: AgentKey) -> None:
    body = signed_body(key, content="what was signed")
    reply = await served.call("POST", "/v1/memories", {**body, "content": "something else"},
                              agent=SIGNER)
    assert reply.status == 400 and reply.body["error"]["code"] == "bad_signature"
    imposter = await served.call("POST", "/v1/memories", body, agent="dev:tester")
    assert imposter.status == 400  # signed by agent-b, sent as dev:tester: author differs
    with psycopg.connect(served.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)


async def test_stale_signature_and_replay_are_409(served: CortexClient, key: AgentKey) -> None:
    stale = signed_body(key, content="old", at=datetime.now(UTC) - timedelta(minutes=10))
    reply = await served.call("POST", "/v1/memories", stale, agent=SIGNER)
    assert reply.status == 409 and reply.body["error"]["code"] == "replay_window"
    body = signed_body(key, content="once")
    assert (await served.call("POST", "/v1/memories", body, agent=SIGNER)).status == 201
    again = await served.call("POST", "/v1/memories", body, agent=SIGNER)
    assert again.status == 409 and again.body["error"]["code"] == "replay"
    with psycopg.connect(served.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (1,)


async def test_signed_update_then_unsigned_update(served: CortexClient, key: AgentKey) -> None:
    stored = (await served.call("POST", "/v1/memories", {"namespace": "kb", "content": "draft"},
                                agent=SIGNER)).body
    path = f"/v1/memories/{stored['id']}"
    body = signed_body(key, content="final")
    reply = await served.call("PATCH", path, {"content": "final", "signature": body["signature"],
                                              "signed_at": body["signed_at"]}, agent=SIGNER)
    assert reply.status == 200, reply.text
    check = await verify(served, stored["id"])
    assert check["signature_verified"] and check["revision"] == 2
    assert (await served.call("PATCH", path, {"title": "t"}, agent=SIGNER)).status == 200
    assert (await verify(served, stored["id"]))["reason"] == "unsigned"  # revision 3


async def test_content_changed_behind_the_server_no_longer_verifies(
    served: CortexClient, key: AgentKey,
) -> None:
    stored = (await served.call("POST", "/v1/memories", signed_body(key, content="signed"),
                                agent=SIGNER)).body
    with psycopg.connect(served.dsn) as conn:
        conn.execute("UPDATE memories SET content = 'forged' WHERE id = %s", (stored["id"],))
    check = await verify(served, stored["id"])
    assert (check["signature_verified"], check["reason"]) == (False, "no_trusted_key_verifies")
    deep = (await served.call("GET", "/v1/audit/verify?deep=true")).body["deep"]
    assert [(m["id"], m["problem"]) for m in deep["mismatches"]] == [(stored["id"], "changed")]


async def test_removed_signature_is_named_by_the_deep_audit(
    served: CortexClient, key: AgentKey,
) -> None:
    stored = (await served.call("POST", "/v1/memories", signed_body(key, content="signed"),
                                agent=SIGNER)).body
    with psycopg.connect(served.dsn) as conn:
        conn.execute("DELETE FROM memory_signatures WHERE memory_id = %s", (stored["id"],))
    assert (await verify(served, stored["id"]))["reason"] == "unsigned"
    deep = (await served.call("GET", "/v1/audit/verify?deep=true")).body["deep"]
    assert [(m["id"], m["problem"], m["fields"]) for m in deep["mismatches"]] == [
        (stored["id"], "changed", ["signature_sha256"])]


async def test_unknown_agent_signature_is_stored_unsigned(served: CortexClient) -> None:
    stranger = generate_key(AgentId("dev:stranger"))
    reply = await served.call("POST", "/v1/memories", signed_body(stranger, content="who?"),
                              agent="dev:stranger")
    assert reply.status == 201
    assert (await verify(served, reply.body["id"]))["attest_level"] == "unsigned"
