"""A space's records are not read natively but by its authority (issue 37 item 3, ADR 0083):
with the default native scopes (``memory.read`` everywhere), a principal with no grant, and
a grantee of another context, get 404 for a record through ``GET /v1/memories/{id}`` and
its verify, and do not find it in the listing, recall or the graph, over HTTP and MCP; a
plain memory in the same namespace reads as before; the authority reads everything
natively; the grantee reads its own context through the family.
"""

from __future__ import annotations

from pathlib import Path

from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import error
from tests.mcp.test_mcp_http import ok as tool_ok
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok
from tests.support.cortex import MakeCortex

SPACE = {"space_id": "kb"}


async def test_records_are_read_natively_by_the_space_authority_only(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crew = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "stranger": "", "g": ""})
    await ok(crew, "owner", "memory.subjects.ensure", {**SPACE, "subject_id": "u1"})
    await ok(crew, "owner", "memory.grants.grant", {
        **SPACE, "principal_id": "g", "capabilities": ["records_read"], "context_ids": ["c1"]})
    record = (await ok(crew, "owner", "memory.records.create", {
        **SPACE, "subject_id": "u1", "content": {"text": "private quokka ledger"},
        "placement": {"context_id": "c2"}}))["refs"][0]
    mine = (await ok(crew, "owner", "memory.records.create", {
        **SPACE, "subject_id": "u1", "content": {"text": "shared quokka note"},
        "placement": {"context_id": "c1"}}))["refs"][0]
    plain = str((await crew.store("owner", "kb", "plain quokka memory"))["id"])

    for who in ("stranger", "g"):
        for path in (f"/v1/memories/{record}", f"/v1/memories/{record}/verify",
                     f"/v1/memories/{mine}"):
            reply = await crew.call(who, "GET", path)
            assert reply.status == 404 and "quokka" not in reply.text, (who, path, reply.text)
        assert (await crew.call(who, "GET", f"/v1/memories/{plain}")).status == 200
        listed = await crew.call(who, "GET", "/v1/memories?namespace=kb")
        assert [m["id"] for m in listed.body["memories"]] == [plain], listed.text
        recalled = await crew.call(who, "POST", "/v1/recall",
                                   {"query": "quokka", "namespace": "kb"})
        assert [h["id"] for h in recalled.body["results"]] == [plain], recalled.text
        headers = {"Authorization": f"Bearer {crew.tokens[who]}"}
        async with mcp_client(crew.client, headers=headers) as mcp:
            got = await mcp.call_tool("memory_get", {"id": record})
            assert error(got)["status"] == 404
            found = tool_ok(await mcp.call_tool("memory_recall", {"query": "quokka",
                                                                  "namespace": "kb"}))
            assert [h["id"] for h in found["results"]] == [plain]
    # the graph: a record is a hidden node, removed with its edges
    linked = await crew.call("stranger", "POST", "/v1/links", {
        "src_id": plain, "dst_id": record, "relation": "related_to"})
    assert linked.status == 201, linked.text
    for who in ("stranger", "g"):
        graph = await crew.call(who, "POST", "/v1/kg/query", {"start_id": plain, "depth": 1})
        assert [n["id"] for n in graph.body["nodes"]] == [plain], graph.text
        links = await crew.call(who, "GET", f"/v1/memories/{plain}/links")
        assert links.status == 200 and links.body["links"] == [], links.text
    # the grantee reads its context through the family, under its grant
    assert (await ok(crew, "g", "memory.records.get", {
        **SPACE, "record_id": mine}))["content"]["text"] == "shared quokka note"
    # the authority reads all of it natively
    assert (await crew.call("owner", "GET", f"/v1/memories/{record}")).status == 200
    everything = await crew.call("owner", "POST", "/v1/recall",
                                 {"query": "quokka", "namespace": "kb"})
    assert {h["id"] for h in everything.body["results"]} == {record, mine, plain}
