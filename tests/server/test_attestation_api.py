"""Attested links over HTTP: Cortex and Agent custody, rejection of bad signatures, replay,
re-verification from the stored row, and the audit chain behind every signed write."""

import base64
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from nacl.signing import VerifyKey

from attested_cortex.attest.keyfiles import PRIVATE_FILE, write_identity
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex

CORTEX_AGENT = "dev:tester"  # the default caller: its key is mounted (Cortex custody)
SELF_SIGNER = "dev:agent-b"  # holds its own key; only the public half is mounted


@pytest.fixture
def agent_b_key() -> AgentKey:
    return generate_key(AgentId(SELF_SIGNER))


@pytest.fixture
async def signed(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
                 agent_b_key: AgentKey) -> CortexClient:
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId(CORTEX_AGENT)))
    write_identity(keys / "agent-b", agent_b_key)
    (keys / "agent-b" / PRIVATE_FILE).unlink()  # Agent custody: the cortex never holds it
    return await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                             graph_backend="CTE")


async def two(client: CortexClient) -> tuple[str, str]:
    return (await client.store("kb", "one"))["id"], (await client.store("kb", "two"))["id"]


def instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def client_signature(key: AgentKey, body: dict[str, Any]) -> str:
    """What an agent does on its side: canonical CBOR of the payload, Ed25519 signature."""
    start = instant(body["valid_from"])
    assert start is not None
    payload = link_payload(src_id=body["src_id"], dst_id=body["dst_id"],
                           relation=body["relation"], observed_by=key.agent_id,
                           valid_from=start, valid_until=instant(body.get("valid_until")))
    return base64.b64encode(sign(key, payload.encode())).decode()


async def audit(client: CortexClient) -> dict[str, Any]:
    reply = await client.call("GET", "/v1/audit/verify")
    assert reply.status == 200
    return dict(reply.body)


def signed_link_events(client: CortexClient) -> int:
    """Events recording a signed link statement (every write also appends a record)."""
    with psycopg.connect(client.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM signed_events "
                           "WHERE event_type = 'link.created'").fetchone()
    assert row is not None
    return int(row[0])


async def test_cortex_custody_signs_and_verifies(signed: CortexClient) -> None:
    a, b = await two(signed)
    link = await signed.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                   "relation": "related_to"})
    assert link.status == 201, link.text
    assert link.body["attest_level"] == "self_signed"
    assert link.body["signed_by"] == CORTEX_AGENT and link.body["signature"]
    check = await signed.call("GET", f"/v1/links/{link.body['id']}/verify")
    assert check.body["signature_verified"] is True
    assert check.body["attest_level"] == "self_signed"
    report = await audit(signed)
    assert report["ok"] and report["first_bad_sequence"] is None
    assert signed_link_events(signed) == 1


async def test_agent_custody_signature_verifies_with_only_the_public_key(
    signed: CortexClient, agent_b_key: AgentKey,
) -> None:
    a, b = await two(signed)
    body = {"src_id": a, "dst_id": b, "relation": "supersedes",
            "valid_from": "2026-11-01T10:00:00.123Z"}
    body["signature"] = client_signature(agent_b_key, body)
    link = await signed.call("POST", "/v1/links", body, agent=SELF_SIGNER)
    assert link.status == 201, link.text
    assert link.body["attest_level"] == "peer_attested"
    stored = link.body
    payload = link_payload(src_id=stored["src_id"], dst_id=stored["dst_id"],
                           relation=stored["relation"], observed_by=stored["observed_by"],
                           valid_from=1793527200123, valid_until=None)
    VerifyKey(agent_b_key.public.public_key).verify(
        payload.encode(), base64.b64decode(stored["signature"]))
    assert (await signed.call("GET", f"/v1/links/{stored['id']}/verify")).body[
        "signature_verified"]


async def test_bad_signature_is_400_and_writes_nothing(
    signed: CortexClient, agent_b_key: AgentKey,
) -> None:
    a, b = await two(signed)
    body = {"src_id": a, "dst_id": b, "relation": "related_to",
            "valid_from": "2026-11-01T10:00:00Z"}
    body["signature"] = client_signature(agent_b_key, {**body, "relation": "contradicts"})
    reply = await signed.call("POST", "/v1/links", body, agent=SELF_SIGNER)
    assert reply.status == 400 and reply.body["error"]["code"] == "bad_signature"
    for bad in ("not base64!", base64.b64encode(b"short").decode()):
        again = await signed.call("POST", "/v1/links", {**body, "signature": bad},
                                  agent=SELF_SIGNER)
        assert again.status == 400, again.text
    assert (await signed.call("GET", f"/v1/memories/{a}/links")).body["links"] == []
    assert signed_link_events(signed) == 0


async def test_unknown_key_is_accepted_but_unsigned(signed: CortexClient) -> None:
    a, b = await two(signed)
    stranger = generate_key(AgentId("dev:stranger"))
    body = {"src_id": a, "dst_id": b, "relation": "related_to",
            "valid_from": "2026-11-01T10:00:00Z"}
    body["signature"] = client_signature(stranger, body)
    reply = await signed.call("POST", "/v1/links", body, agent="dev:stranger")
    assert reply.status == 201 and reply.body["attest_level"] == "unsigned"
    check = await signed.call("GET", f"/v1/links/{reply.body['id']}/verify")
    assert check.body["signature_verified"] is False
    assert signed_link_events(signed) == 0


async def test_replays_are_refused(signed: CortexClient, agent_b_key: AgentKey) -> None:
    a, b = await two(signed)
    link_id = str(uuid.uuid4())
    first = await signed.call("POST", "/v1/links", {"id": link_id, "src_id": a, "dst_id": b,
                                                    "relation": "related_to"})
    assert first.status == 201
    reused = await signed.call("POST", "/v1/links", {"id": link_id, "src_id": b, "dst_id": a,
                                                     "relation": "x-cites"})
    assert reused.status == 409 and reused.body["error"]["code"] == "replay"
    body = {"src_id": b, "dst_id": a, "relation": "derived_from",
            "valid_from": "2026-11-01T10:00:00Z", "valid_until": "2026-11-02T10:00:00Z"}
    body["signature"] = client_signature(agent_b_key, body)
    assert (await signed.call("POST", "/v1/links", body, agent=SELF_SIGNER)).status == 409
    body = {**body, "valid_until": "2099-01-01T00:00:00Z"}
    body["signature"] = client_signature(agent_b_key, body)
    assert (await signed.call("POST", "/v1/links", body, agent=SELF_SIGNER)).status == 201
    assert (await signed.call("POST", "/v1/links", body, agent=SELF_SIGNER)).status == 409


async def test_row_changed_behind_the_server_verifies_false(signed: CortexClient) -> None:
    a, b = await two(signed)
    link = (await signed.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                    "relation": "related_to"})).body
    closed = await signed.call("POST", "/v1/kg/invalidate", {"link_id": link["id"]})
    assert closed.status == 200
    path = f"/v1/links/{link['id']}/verify"
    assert (await signed.call("GET", path)).body["signature_verified"] is True
    with psycopg.connect(signed.dsn) as conn:
        conn.execute("UPDATE links SET relation = 'contradicts' WHERE id = %s", (link["id"],))
    assert (await signed.call("GET", path)).body["signature_verified"] is False


async def test_tampered_audit_chain_is_reported(signed: CortexClient) -> None:
    a, b = await two(signed)
    for relation in ("related_to", "supersedes", "contradicts"):
        await signed.call("POST", "/v1/links", {"src_id": a, "dst_id": b, "relation": relation})
    assert signed_link_events(signed) == 3
    with psycopg.connect(signed.dsn) as conn:
        conn.execute("ALTER TABLE signed_events DISABLE TRIGGER USER")
        conn.execute("UPDATE signed_events SET agent_id = 'dev:mallory' WHERE sequence = 4")
    report = await audit(signed)
    assert report["ok"] is False and report["first_bad_sequence"] == 4


async def test_capabilities_report_live_keys(signed: CortexClient) -> None:
    caps = (await signed.call("GET", "/v1/capabilities")).body["attestation"]
    assert caps["enabled"] and caps["agent_keys"] == 2
    assert caps["cortex_custody_agents"] == [CORTEX_AGENT]
    assert SELF_SIGNER in caps["agents"]
