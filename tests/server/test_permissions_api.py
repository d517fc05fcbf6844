"""Permissions through HTTP: rules in the three modes, ownership, scopes, read isolation.

Agents authenticate with real generated tokens (``--auth tokens``) so each carries the
scopes its tokens-file line grants.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2
import psycopg
import pytest

from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from attested_cortex.types import AgentId
from tests.server.test_hooks_api import count_memories, hooks_file, recorder
from tests.support.cortex import CortexClient, MakeCortex, Reply


@dataclass
class Agents:
    client: CortexClient
    tokens: dict[str, str]

    async def call(self, who: str, method: str, path: str, body: Any = None,
                   **headers: str) -> Reply:
        return await self.client.call(method, path, body, agent=None, headers={
            "Authorization": f"Bearer {self.tokens[who]}", **headers})

    async def store(self, who: str, namespace: str, content: str) -> Any:
        reply = await self.call(who, "POST", "/v1/memories",
                                {"namespace": namespace, "content": content})
        assert reply.status == 201, reply.text
        return reply.body


async def agents(make_cortex: MakeCortex, dsn: str, tmp_path: Path,
                 scopes: dict[str, str], **settings: Any) -> Agents:
    tokens: dict[str, str] = {}
    lines = []
    for name, granted in scopes.items():
        token, digest = generate()
        tokens[name] = token
        lines.append(f"{digest} {name} {granted}".strip())
    (tmp_path / "tokens").write_text("\n".join(lines) + "\n")
    client = await make_cortex(dsn, migrated=False, graph_backend="CTE",
                               auth=TokenAuth.from_file(tmp_path / "tokens"), **settings)
    return Agents(client, tokens)


def deny_rule(**more: Any) -> dict[str, Any]:
    return {"source": "prod/no-secrets", "namespace": "secret/**", "agents": ["*"],
            "operations": ["store"], "decision": "deny", "reason": "secrets live in a vault",
            **more}


@pytest.mark.parametrize(("mode", "status"), [("advisory", 201), ("enforce", 403),
                                              ("off", 201)])
async def test_a_deny_rule_in_each_mode(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path, mode: str, status: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "attested_cortex.policy")
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"alice": ""},
                        permissions={"mode": mode, "rules": [deny_rule()]})
    reply = await team.call("alice", "POST", "/v1/memories",
                            {"namespace": "secret/keys", "content": "k"})
    assert reply.status == status, reply.text
    if status == 403:
        error = reply.body["error"]
        assert error["message"] == "secrets live in a vault"
        assert error["details"]["source"] == "rule:prod/no-secrets"
        assert count_memories(migrated_pg15_dsn) == 0
    metrics = (await team.client.call("GET", "/metrics")).text
    counted = 'cortex_policy_decisions_total{effect="advisory",operation="memory.store",' \
              'source="rule",verdict="deny"} 1.0'
    assert (counted in metrics) == (mode == "advisory")
    assert any(r.message == "policy decision" for r in caplog.records) == (mode != "off")
    # other namespaces are untouched by the rule
    assert (await team.call("alice", "POST", "/v1/memories",
                            {"namespace": "notes", "content": "n"})).status == 201


async def test_ask_user_rule_without_the_approval_api_is_403_and_writes_nothing(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"alice": ""}, permissions={
        "mode": "enforce", "rules": [deny_rule(decision="ask_user", reason="ask first")]})
    reply = await team.call("alice", "POST", "/v1/memories",
                            {"namespace": "secret/a", "content": "k"})
    assert reply.status == 403 and reply.body["error"]["code"] == "approval_required"
    assert count_memories(migrated_pg15_dsn) == 0


async def test_write_default_applies_only_without_a_matching_rule(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    allow = deny_rule(namespace="open/**", decision="allow", source="prod/open")
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"alice": ""}, permissions={
        "mode": "enforce", "write_default": "deny", "rules": [allow]})
    assert (await team.call("alice", "POST", "/v1/memories",
                            {"namespace": "open/x", "content": "k"})).status == 201
    denied = await team.call("alice", "POST", "/v1/memories", {"namespace": "x", "content": "k"})
    assert denied.status == 403 and denied.body["error"]["code"] == "no_rule"
    assert (await team.call("alice", "POST", "/v1/recall", {"query": "k"})).status == 200


async def test_capabilities_report_mode_rules_and_quotas(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    rules = [deny_rule(priority=1), deny_rule(source="b/r", namespace="a", decision="allow",
                                               priority=9, inherit=False, reason=None)]
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"alice": "memory.read,memory.write"},
                        permissions={"mode": "enforce", "rules": rules},
                        quotas={"requests_per_second": 50, "storage_per_agent_bytes": 1000})
    await team.store("alice", "n", "12345")
    caps = (await team.call("alice", "GET", "/v1/capabilities")).body
    assert caps["permissions"]["mode"] == "enforce"
    assert caps["permissions"]["rule_summary"] == [
        "[9] allow store in a (no inherit) for * (b/r)",
        "[1] deny store in secret/** for * (prod/no-secrets): secrets live in a vault",
    ]
    you = caps["quotas"]["you"]
    assert caps["quotas"]["enabled"] and caps["quotas"]["requests_per_second"] == 50
    # 1 byte of namespace and 5 of content (an empty metadata counts 0)
    assert you["stored_bytes"] == 6 and you["storage_limit_bytes"] == 1000
    assert you["scopes"] == ["memory.read", "memory.write"]


@pytest.mark.parametrize("mode", ["advisory", "enforce", "off"])
async def test_only_the_author_updates_or_deletes_in_every_mode(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path, mode: str,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"alice": "", "bob": "", "admin": "memory.override,memory.write,"
                         "memory.forget,memory.read"}, permissions={"mode": mode})
    memory = await team.store("alice", "notes", "alice's note")
    path = f"/v1/memories/{memory['id']}"
    for method, body in [("PATCH", {"content": "bob was here"}), ("DELETE", None)]:
        reply = await team.call("bob", method, path, body)
        assert reply.status == 403 and reply.body["error"]["code"] == "not_owner", reply.text
    assert (await team.call("bob", "GET", path)).body["content"] == "alice's note"
    assert (await team.call("admin", "PATCH", path, {"title": "by admin"})).status == 200
    assert (await team.call("alice", "DELETE", path)).status == 200


async def test_a_rule_naming_the_agent_grants_updates_of_others_memories(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    grant = {"source": "t/editors", "namespace": "wiki/**", "agents": ["bob"],
             "operations": ["update"], "decision": "allow"}
    everyone = {**grant, "source": "t/all", "agents": ["*"], "operations": ["delete"]}
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"alice": "", "bob": ""},
                        permissions={"rules": [grant, everyone]})
    memory = await team.store("alice", "wiki/page", "v1")
    path = f"/v1/memories/{memory['id']}"
    assert (await team.call("bob", "PATCH", path, {"content": "v2"})).status == 200
    # a wildcard rule is not an explicit grant over someone else's memory
    assert (await team.call("bob", "DELETE", path)).status == 403


async def test_only_the_observer_invalidates_and_never_retroactively(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"alice": "", "bob": "", "admin": "graph.write,memory.override"})
    a = await team.store("alice", "n", "a")
    b = await team.store("alice", "n", "b")
    link = (await team.call("alice", "POST", "/v1/links", {
        "src_id": a["id"], "dst_id": b["id"], "relation": "related_to"})).body
    start = link["valid_from"]
    retro = start.replace("+00:00", "").rstrip("Z")
    retro_until = retro[:-3] + str((int(retro[-3:]) + 1) % 1000).zfill(3) + "+00:00" \
        if "." in retro else start
    plain = await team.call("bob", "POST", "/v1/kg/invalidate", {"link_id": link["id"]})
    assert plain.status == 403 and plain.body["error"]["code"] == "not_owner"
    retroactive = await team.call("admin", "POST", "/v1/kg/invalidate",
                                  {"link_id": link["id"], "valid_until": retro_until})
    assert retroactive.status == 403, retroactive.text
    assert retroactive.body["error"]["code"] == "retroactive_invalidation"
    timeline = await team.call("alice", "GET", f"/v1/kg/timeline?memory_id={a['id']}")
    assert timeline.body["links"][0]["valid_until"] is None
    assert (await team.call("admin", "POST", "/v1/kg/invalidate",
                            {"link_id": link["id"]})).status == 200


async def test_scopes_are_checked_before_rules_and_isolate_reads(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    allow_all = {"source": "t/all", "namespace": "**", "agents": ["*"], "operations": ["*"],
                 "decision": "allow"}
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {
        "writer": "", "reader": "memory.read:team-a/**,graph.read:team-a/**"},
        permissions={"mode": "enforce", "rules": [allow_all]})
    mine = await team.store("writer", "team-a/notes", "shared launch plan")
    theirs = await team.store("writer", "team-b/notes", "secret launch plan")
    await team.call("writer", "POST", "/v1/links", {"src_id": mine["id"],
                                                     "dst_id": theirs["id"],
                                                     "relation": "related_to"})
    write = await team.call("reader", "POST", "/v1/memories",
                            {"namespace": "team-a/x", "content": "c"})
    assert write.status == 403 and write.body["error"]["code"] == "scope_denied"
    recall = await team.call("reader", "POST", "/v1/recall", {"query": "launch plan"})
    assert [r["id"] for r in recall.body["results"]] == [mine["id"]]
    assert "secret" not in recall.text
    there = await team.call("reader", "POST", "/v1/recall",
                            {"query": "launch", "namespace": "team-b/notes"})
    assert there.status == 403 and there.body["error"]["code"] == "scope_denied"
    listing = await team.call("reader", "GET", "/v1/memories")
    assert [m["id"] for m in listing.body["memories"]] == [mine["id"]]
    graph = await team.call("reader", "POST", "/v1/kg/query", {"start_id": mine["id"]})
    assert [n["id"] for n in graph.body["nodes"]] == [mine["id"]] and graph.body["edges"] == []
    assert (await team.call("reader", "POST", "/v1/kg/query",
                            {"start_id": theirs["id"]})).status == 403
    assert (await team.call("reader", "GET", f"/v1/memories/{theirs['id']}")).status == 403
    # a path between two readable memories that runs through an unreadable one is withheld
    also = await team.store("writer", "team-a/notes", "the other end")
    await team.call("writer", "POST", "/v1/links", {"src_id": theirs["id"],
                                                     "dst_id": also["id"],
                                                     "relation": "related_to"})
    assert len((await team.call("writer", "POST", "/v1/kg/paths", {
        "src_id": mine["id"], "dst_id": also["id"]})).body["paths"]) == 1
    paths = await team.call("reader", "POST", "/v1/kg/paths",
                            {"src_id": mine["id"], "dst_id": also["id"]})
    assert paths.status == 200 and paths.body["paths"] == []
    links = await team.call("reader", "GET", f"/v1/memories/{mine['id']}/links")
    assert links.body["links"] == []


async def test_a_request_may_narrow_its_scopes_but_never_widen_them(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"lead": "memory.read,memory.write:team/**"})
    narrowed = await team.call("lead", "POST", "/v1/memories",
                               {"namespace": "team/a", "content": "c"},
                               **{"X-Cortex-Scopes": "memory.read:team/b/**"})
    assert narrowed.status == 403 and narrowed.body["error"]["code"] == "scope_denied"
    wider = await team.call("lead", "POST", "/v1/recall", {"query": "c"},
                            **{"X-Cortex-Scopes": "memory.write"})
    assert wider.status == 403 and wider.body["error"]["code"] == "scope_widening"
    within = await team.call("lead", "POST", "/v1/memories",
                             {"namespace": "team/b/x", "content": "c"},
                             **{"X-Cortex-Scopes": "memory.write:team/b/**"})
    assert within.status == 201, within.text


async def test_would_be_denials_and_refusals_are_signed_into_the_audit_chain(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    write_identity(keys / "cortex", generate_key(AgentId("cortex:policy")))
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"alice": "", "bob": ""},
                        keys_dir=keys, audit_signer="cortex:policy",
                        permissions={"mode": "advisory", "rules": [deny_rule()]})
    await team.store("alice", "secret/keys", "k")  # advisory: stored, recorded
    memory = await team.store("alice", "notes", "n")
    refused = await team.call("bob", "DELETE", f"/v1/memories/{memory['id']}")
    assert refused.status == 403
    report = (await team.call("alice", "GET", "/v1/audit/verify")).body
    # since issue 13 each store also appends its (unsigned: alice has no key) write record
    assert report["ok"] and report["events"] == 4 and report["signatures_checked"] == 2
    with psycopg.connect(migrated_pg15_dsn) as conn:
        rows = conn.execute("SELECT agent_id, event_type, payload FROM signed_events "
                            "WHERE event_type LIKE 'policy.%' ORDER BY sequence").fetchall()
    statements = [(agent, kind, cbor2.loads(payload)) for agent, kind, payload in rows]
    assert [(a, k, s["actor"], s["verdict"], s["source"]) for a, k, s in statements] == [
        ("cortex:policy", "policy.advisory", "alice", "deny", "rule:prod/no-secrets"),
        ("cortex:policy", "policy.enforced", "bob", "deny", "ownership"),
    ]


async def test_a_hook_cannot_move_a_write_outside_the_callers_scopes(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = recorder(tmp_path, events=["pre_store"], mode="exec",
                    answer={"decision": "modify", "delta": {"namespace": "team-b/x"}})
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"writer": "memory.write:team-a/**"},
                        hooks_file=hooks_file(tmp_path, hook))
    reply = await team.call("writer", "POST", "/v1/memories",
                            {"namespace": "team-a/x", "content": "c"})
    assert reply.status == 403 and reply.body["error"]["code"] == "scope_denied"
    assert count_memories(migrated_pg15_dsn) == 0


async def test_memory_verify_and_deep_audit_need_their_read_scopes(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"writer": "memory.read,memory.write",
                         "outsider": "memory.read:other/**",
                         "auditor": "audit.read"})
    memory = await team.store("writer", "team/a", "c")
    path = f"/v1/memories/{memory['id']}/verify"
    mine = await team.call("writer", "GET", path)
    assert mine.status == 200 and mine.body["attest_level"] == "unsigned", mine.text
    outside = await team.call("outsider", "GET", path)
    assert outside.status == 403 and outside.body["error"]["code"] == "scope_denied"
    unscoped = await team.call("writer", "GET", "/v1/audit/verify?deep=true")
    assert unscoped.status == 403 and unscoped.body["error"]["code"] == "scope_denied"
    deep = await team.call("auditor", "GET", "/v1/audit/verify?deep=true")
    assert deep.status == 200 and deep.body["ok"] and deep.body["deep"]["ok"], deep.text
