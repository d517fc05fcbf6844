"""Receipts on spoke reads (issue 40, ADR 0104): ``memory.records.get``, ``memory.records.list``
and ``memory.recall`` asked with ``receipts: true`` (over HTTP and the ``spoke_memory`` MCP
tool) carry, for each returned record, the inclusion proof of the op record that last wrote
it (migration 0037's index), checked here as a client would: the op record names the record
as returned, and pymerkle (an independent RFC 9162 implementation) verifies the path to the
root of the checkpoint the answer carries, whose signature the log's key verifies; a row
changed behind the server gets ``null``. One
cortex, five records, one witness-free checkpoint cut: a few seconds."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from attested_cortex.attest import decoding as cbor
from attested_cortex.attest import notes
from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.types import AgentId
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import ok as tool_ok
from tests.server.test_audit_checkpoints import SIGNER
from tests.server.test_permissions_api import Agents, agents
from tests.server.test_receipts import verify_inclusion
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.spoke.test_placement_audit import moved_to_shared
from tests.support.cortex import MakeCortex

SUBJECT = {"space_id": "kb", "subject_id": "u1"}


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def check(receipts: dict[str, Any], record: dict[str, Any], log: notes.Verifier) -> int:
    """What a client does: the checkpoint is the log's, the op record names this record in
    this space and subject, and its leaf's path verifies to the checkpoint's root. Returns
    the event's sequence."""
    held = notes.open_checkpoint(receipts["checkpoint"], log)
    assert receipts["tree_size"] == held.size and _b(receipts["root_hash"]) == held.root
    receipt = receipts["memories"][record["record_id"]]
    assert receipt["event_type"].startswith("spoke.memory.")
    written = cbor.decode(_b(receipt["record"]))
    [row] = [r for r in written["rows"]["record"] if r["record_id"] == record["record_id"]]
    assert (row["space_id"], row["subject_id"], row["context_id"]) == (
        record["space_id"], record["subject_id"], record["placement"].get("context_id"))
    return verify_inclusion(receipt, held.size, held.root)


async def _team(make_cortex: MakeCortex, dsn: str, tmp_path: Path) -> Agents:
    keys = tmp_path / "keys"
    write_identity(keys / "audit", generate_key(AgentId(SIGNER)))
    return await agents(make_cortex, dsn, tmp_path, {"owner": OWNER}, keys_dir=keys,
                        audit_signer=SIGNER, audit={"checkpoints": {
                            "every_events": 10**6, "every_seconds": 3600}})


async def test_spoke_reads_carry_receipts_a_client_verifies(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await _team(make_cortex, migrated_pg15_dsn, tmp_path)
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    made = [(await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": f"receipted wombat {i}"},
        "placement": {"context_id": "c1"} if i % 2 else {"shared": True}}))["refs"][0]
        for i in range(4)]
    got = await ok(team, "owner", "memory.records.get",
                   {"space_id": "kb", "record_id": made[1]})
    updated = await ok(team, "owner", "memory.records.update", {
        "space_id": "kb", "record_id": made[1], "expected_revision": got["revision"],
        "content": {"text": "receipted wombat changed"}})
    assert updated["status"] == "committed", updated
    key = await team.call("owner", "GET", "/v1/audit/checkpoint",
                          Accept="application/json")
    assert key.status == 200, key.text
    log = notes.Verifier.parse(key.body["log_key"])

    got = await ok(team, "owner", "memory.records.get",
                   {"space_id": "kb", "record_id": made[1], "receipts": True})
    update_seq = check(got["receipts"], got, log)
    create_seq = check((await ok(team, "owner", "memory.records.get", {
        "space_id": "kb", "record_id": made[0], "receipts": True}))["receipts"],
        {**got, "record_id": made[0], "placement": {"shared": True}}, log)
    assert update_seq > create_seq  # the update is the record's last write, not the create
    listed = await ok(team, "owner", "memory.records.list", {"space_id": "kb",
                                                             "receipts": True})
    assert {r["record_id"] for r in listed["records"]} == set(made)
    for record in listed["records"]:
        check(listed["receipts"], record, log)
    recalled = await ok(team, "owner", "memory.recall", {"space_id": "kb",
                                                         "query": "wombat", "receipts": True})
    assert recalled["results"], recalled
    for hit in recalled["results"]:
        check(recalled["receipts"], hit["record"], log)
    headers = {"Authorization": f"Bearer {team.tokens['owner']}"}
    async with mcp_client(team.client, headers=headers) as client:
        over_mcp = tool_ok(await client.call_tool("spoke_memory", {
            "op": "memory.records.get",
            "request": {"space_id": "kb", "record_id": made[1], "receipts": True}}))
        assert check(over_mcp["receipts"], over_mcp, log) == update_seq

    plain = await ok(team, "owner", "memory.records.get",
                     {"space_id": "kb", "record_id": made[1]})
    assert "receipts" not in plain
    assert "receipts" not in await ok(team, "owner", "memory.records.list",
                                      {"space_id": "kb"})
    # a placement changed behind the server matches no op record: null, the read stands
    moved_to_shared(migrated_pg15_dsn, made[1])
    behind = await ok(team, "owner", "memory.records.get",
                      {"space_id": "kb", "record_id": made[1], "receipts": True})
    assert behind["receipts"]["memories"] == {made[1]: None}


async def test_without_an_audit_signer_spoke_receipts_are_404(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER})
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    made = (await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "no signer"}, "placement": {"shared": True}}))["refs"][0]
    refused(await op(team, "owner", "memory.records.get", {
        "space_id": "kb", "record_id": made, "receipts": True}), 404, "no_checkpoints")
    assert (await ok(team, "owner", "memory.records.get",
                     {"space_id": "kb", "record_id": made}))["record_id"] == made
