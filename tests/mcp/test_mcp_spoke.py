"""The ``spoke_memory`` MCP tool (ADR 0067) with the SDK's client, in both protocol eras:
the same dispatch as ``POST /v1/spoke/memory`` (grants, receipts, idempotency keys, the
capability gate), its flags negotiated on each call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import error, ok
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, PATH
from tests.support.cortex import MakeCortex


def spoke(name: str, request: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"op": name, "request": request, **more}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_family_through_one_tool(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path, mode: str,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER,
                                                                   "alice": ""})
    owner = {"Authorization": f"Bearer {team.tokens['owner']}"}
    alice = {"Authorization": f"Bearer {team.tokens['alice']}"}
    subject = {"space_id": "kb", "subject_id": "u1"}
    async with mcp_client(team.client, mode=mode, headers=owner) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["spoke_memory"].annotations.read_only_hint is False
        described = ok(await client.call_tool("spoke_memory", spoke("memory.describe", {})))
        assert "spoke-memory-transfer" in described["served_flags"]
        first = ok(await client.call_tool("spoke_memory", spoke(
            "memory.subjects.ensure", subject, idempotency_key="k-1")))
        again = ok(await client.call_tool("spoke_memory", spoke(
            "memory.subjects.ensure", subject, idempotency_key="k-1")))
        assert first == again and first["status"] == "committed"
        reused = error(await client.call_tool("spoke_memory", spoke(
            "memory.subjects.ensure", {**subject, "kind": "person:x"},
            idempotency_key="k-1")))
        assert reused["status"] == 409 and reused["error"]["code"] == "idempotency_key_reused"
        ok(await client.call_tool("spoke_memory", spoke("memory.grants.grant", {
            "space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
            "context_ids": ["c1"], "capabilities": ["records_read", "records_write"]})))
        gated = error(await client.call_tool("spoke_memory", spoke(
            "memory.exports.create", {"space_id": "kb"})))
        assert gated["status"] == 400 and gated["error"]["code"] == "capability_missing"
        assert gated["error"]["details"]["negotiated"] == ["spoke-memory"]
        exported = ok(await client.call_tool("spoke_memory", spoke(
            "memory.exports.create", {"space_id": "kb"},
            capabilities=["spoke-memory", "spoke-memory-transfer"])))
        assert exported["status"] == "committed"
        for flags in (["spoke-memory-transfer"], ["spoke-memory", "nope"]):
            bad = error(await client.call_tool("spoke_memory", spoke(
                "memory.describe", {}, capabilities=flags)))
            assert bad["status"] == 400 and bad["error"]["code"] == "invalid_input"
    async with mcp_client(team.client, mode=mode, headers=alice) as client:
        made = ok(await client.call_tool("spoke_memory", spoke("memory.records.create", {
            **subject, "content": {"text": "likes tea"}, "placement": {"context_id": "c1"}})))
        outside = error(await client.call_tool("spoke_memory", spoke(
            "memory.records.create", {**subject, "content": {"text": "x"},
                                      "placement": {"shared": True}})))
        assert outside["status"] == 403 and outside["error"]["code"] == "grant_missing"
    # what the tool wrote, the HTTP dispatch reads
    got = await team.call("alice", "POST", PATH, spoke("memory.records.get", {
        "space_id": "kb", "record_id": made["refs"][0]}))
    assert got.status == 200 and got.body["content"] == {"text": "likes tea"}
