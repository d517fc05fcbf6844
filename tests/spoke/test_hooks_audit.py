"""Hooks and signed audit records of the spoke-memory family (ADR 0067), on a real server,
PostgreSQL and real hook processes: every mutating op fires ``pre/post_spoke_write``,
recall and listing the native read events, with payloads that match their published
schemas; a Deny refuses in the family's envelope and writes nothing, a Modify rewrites the
request, a hook past its timeout fails closed or open; every mutating op appends one
``spoke.<op>`` chain event naming op, principal and space, the deep audit is clean, and a
grant, a freeze, a fence, a receipt or a candidate changed behind the server is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema_rs
import psycopg
import yaml

from attested_cortex.attest.decoding import decode
from attested_cortex.hooks.payload_schemas import schema_for
from attested_cortex.spoke.operations import MEMORY_OPS
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, REFLECTING, ok, op, refused, seeded
from tests.support.cortex import MakeCortex

HOOK = str(Path(__file__).parent / "programs" / "spoke_hook.py")
EVENTS = ["pre_spoke_write", "post_spoke_write", "pre_recall", "post_recall", "pre_search",
          "post_search"]
SCOPES = {"owner": OWNER, "alice": "", "bob": ""}


async def hooked(make_cortex: MakeCortex, dsn: str, tmp_path: Path, *,
                 mode: str = "daemon", env: dict[str, str] | None = None,
                 **more: Any) -> Agents:
    hook = {"name": "spoke", "events": EVENTS, "mode": mode, "timeout_ms": 1000,
            "command": [sys.executable, HOOK], "allow_exec_on_hot_path": True,
            "env": {"RECORD_FILE": str(tmp_path / "record.jsonl"), **(env or {})}, **more}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    return await agents(make_cortex, dsn, tmp_path, SCOPES, hooks_file=path)


def recorded(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


async def test_every_mutating_op_and_the_listing_reads_fire_their_events(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await hooked(make_cortex, migrated_pg15_dsn, tmp_path)
    await seeded(team)
    made = await ok(team, "alice", "memory.records.create", {
        "space_id": "kb", "subject_id": "u1", "content": {"text": "likes green tea"},
        "placement": {"context_id": "c1"}}, key="k-1")
    await ok(team, "owner", "memory.recall", {"space_id": "kb", "query": "tea"})
    await ok(team, "owner", "memory.records.list", {"space_id": "kb", "limit": 5})
    await ok(team, "owner", "memory.records.get", {"space_id": "kb",
                                                   "record_id": made["refs"][0]})
    seen = recorded(tmp_path)
    assert [(r["event"], r["payload"].get("op")) for r in seen] == [
        ("pre_spoke_write", "memory.subjects.ensure"),
        ("post_spoke_write", "memory.subjects.ensure"),
        ("pre_spoke_write", "memory.grants.grant"), ("post_spoke_write", "memory.grants.grant"),
        ("pre_spoke_write", "memory.records.create"),
        ("post_spoke_write", "memory.records.create"),
        ("pre_recall", "memory.recall"), ("post_recall", "memory.recall"),
        ("pre_search", "memory.records.list"), ("post_search", "memory.records.list"),
    ]  # a get fires nothing, like a native get
    for record in seen:
        validator = jsonschema_rs.validator_for(schema_for(record["event"]))
        errors = [str(e) for e in validator.iter_errors(record["payload"])]
        assert not errors, (record["event"], errors)
        assert record["namespace"] == "kb"
    by_event = {r["event"]: r for r in seen}
    post = by_event["post_spoke_write"]
    assert post["agent_id"] == "alice" and post["payload"]["principal"] == "alice"
    assert post["payload"]["receipt"] == made
    assert post["payload"]["request"]["content"] == {"text": "likes green tea"}
    hit = by_event["post_recall"]["payload"]["results"][0]
    assert hit["id"] == made["refs"][0] and hit["content"] == "likes green tea"
    assert hit["subject_id"] == "u1" and hit["placement"] == {"context_id": "c1",
                                                                "shared": False}
    assert by_event["post_search"]["payload"]["total_authorized"] == 1


async def test_deny_modify_and_a_withheld_recall(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await hooked(make_cortex, migrated_pg15_dsn, tmp_path, mode="exec", env={
        "SPOKE_DENY_OP": "memory.capture", "SPOKE_REDACT": "[redacted]",
        "SPOKE_DENY_RECALL": "1"})
    await seeded(team)
    before = count(migrated_pg15_dsn, "signed_events")
    denied = refused(await op(team, "alice", "memory.capture", {
        "space_id": "kb", "subject_id": "u1", "capture_scope": {"context_id": "c1"},
        "items": [{"text": "x"}]}, key="k-1"), 403, "hook_denied")
    assert denied["message"] == "not through here"
    assert denied["details"]["hook_code"] == "spoke_policy"
    assert count(migrated_pg15_dsn, "memory_candidates") == 0
    assert count(migrated_pg15_dsn, "memory_receipts") == 2  # the seed's two: key left free
    assert count(migrated_pg15_dsn, "signed_events") == before
    made = await ok(team, "alice", "memory.records.create", {
        "space_id": "kb", "subject_id": "u1", "content": {"text": "password=hunter2"},
        "placement": {"context_id": "c1"}})
    ref = {"space_id": "kb", "record_id": made["refs"][0]}
    assert (await ok(team, "alice", "memory.records.get", ref))["content"] == {
        "text": "[redacted]"}
    withheld = refused(await op(team, "owner", "memory.recall", {"space_id": "kb",
                                                                 "query": "redacted"}),
                       403, "hook_denied")
    assert withheld["details"]["withheld"] is True


async def test_a_hook_modify_that_breaks_the_request_is_400(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await hooked(make_cortex, migrated_pg15_dsn, tmp_path, mode="exec",
                        env={"SPOKE_BAD_MODIFY": "1"})
    refused(await op(team, "owner", "memory.records.create", {
        "space_id": "kb", "subject_id": "u1", "content": {"text": "a"},
        "placement": {"context_id": "c1"}}), 400, "hook_invalid_modify")
    assert count(migrated_pg15_dsn, "memory_records") == 0


async def test_a_hook_past_its_timeout_fails_closed_or_open(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await hooked(make_cortex, migrated_pg15_dsn, tmp_path, mode="exec",
                        env={"SPOKE_SLEEP_S": "3"}, timeout_ms=300, fail_mode="closed")
    ensure = {"space_id": "kb", "subject_id": "u1"}
    failed = refused(await op(team, "owner", "memory.subjects.ensure", ensure), 403,
                     "hook_denied")
    assert failed["details"]["hook_code"] == "hook_failed"
    assert count(migrated_pg15_dsn, "memory_subjects") == 0
    (tmp_path / "open").mkdir()
    opened = await hooked(make_cortex, migrated_pg15_dsn, tmp_path / "open", mode="exec",
                          env={"SPOKE_SLEEP_S": "3"}, timeout_ms=300, fail_mode="open")
    await ok(opened, "owner", "memory.subjects.ensure", ensure)


def chain(dsn: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The op records of the chain: (event type, acting agent, decoded record)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT event_type, agent_id, payload FROM signed_events"
                            " WHERE event_type LIKE 'spoke.%' ORDER BY sequence").fetchall()
    found = []
    for event_type, agent, payload in rows:
        record = decode(bytes(payload))
        assert isinstance(record, dict)
        found.append((event_type, agent, record))
    return found


async def deep(team: Agents) -> dict[str, Any]:
    reply = await team.call("owner", "GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200, reply.text
    assert reply.body["ok"] is True, reply.text  # the chain itself
    found: dict[str, Any] = reply.body["deep"]
    return found


async def test_every_mutating_op_appends_one_op_record_and_the_deep_audit_covers_rows(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, SCOPES)
    await seeded(team)
    space, subject = {"space_id": "kb"}, {"space_id": "kb", "subject_id": "u1"}
    granted = await ok(team, "owner", "memory.grants.grant", {
        **space, "principal_id": "bob", "capabilities": ["records_read"]})
    made = await ok(team, "alice", "memory.records.create", {
        **subject, "content": {"text": "t"}, "placement": {"context_id": "c1"}})
    ref = {**space, "record_id": made["refs"][0]}
    captured = (await ok(team, "owner", "memory.capture", {
        **subject, "capture_scope": {"shared": True},
        "items": [{"text": "a"}, {"text": "b"}]}))["refs"]
    done = [
        ("owner", "memory.grants.revoke", {**space, "grant_id": granted["refs"][0]}),
        ("owner", "memory.spaces.freeze", space), ("owner", "memory.spaces.unfreeze", space),
        ("owner", "memory.subjects.fence", {**subject, "action": "fence_context",
                                            "context_id": "c9"}),
        ("alice", "memory.records.update", {**ref, "expected_revision": 1,
                                            "content": {"text": "u"}}),
        ("owner", "memory.records.promote", {**ref, "expected_revision": 2,
                                             "placement": {"shared": True}}),
        ("owner", "memory.candidates.dismiss", {**space, "candidate_id": captured[0]}),
        ("owner", "memory.candidates.review", {**space, "candidate_id": captured[1],
                                               "decision": "promote"}),
        ("owner", "memory.profile.update", {**subject, "kind": "style", "text": "brief"}),
        ("owner", "memory.records.delete", {**ref, "expected_revision": 3}),
    ]
    receipts = [await ok(team, who, name, request) for who, name, request in done]
    await ok(team, "owner", "memory.reflections.generate", subject, flags=REFLECTING)
    await ok(team, "owner", "memory.exports.create", space,
             flags="spoke-memory, spoke-memory-transfer")
    refused(await op(team, "bob", "memory.grants.revoke", {**space, "grant_id": granted[
        "refs"][0]}), 403, "grant_missing")  # refused: no record
    records = chain(migrated_pg15_dsn)
    assert [(e, a, r["op"], r["principal"], r["space_id"]) for e, a, r in records] == [
        (f"spoke.{name}", who, name, who, "kb") for who, name in [
            ("owner", "memory.subjects.ensure"), ("owner", "memory.grants.grant"),
            ("owner", "memory.grants.grant"), ("alice", "memory.records.create"),
            ("owner", "memory.capture"), *((w, n) for w, n, _ in done),
            ("owner", "memory.reflections.generate"), ("owner", "memory.exports.create")]]
    assert {r["op"] for _, _, r in records} == {
        n for n, declared in MEMORY_OPS.items() if declared.mutating} - {
        "memory.imports.stage", "memory.imports.activate", "memory.imports.discard"}
    revoked = records[5][2]
    assert revoked["refs"] == granted["refs"]
    assert revoked["rows"]["grant"][0]["revoked_at"] is not None
    assert "brief" not in repr(records[13][2])  # content-free: the profile's text is not in it
    report = await deep(team)
    assert report["ok"] is True, report
    assert report["spoke"] == {"grant": 2, "receipt": len(records), "space": 1, "subject": 1,
                               "candidate": 2, "record": 2}

    # tampered behind the server: each is named
    with psycopg.connect(migrated_pg15_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memory_grants SET revoked_at = NULL WHERE grant_id = %s",
                     (granted["refs"][0],))
        conn.execute("UPDATE memory_spaces SET frozen = true")
        conn.execute("UPDATE memory_subjects SET fenced_context_ids = '{}'")
        conn.execute(
            "INSERT INTO memory_grants (grant_id, space_id, principal_id, issued_by,"
            " capabilities) VALUES ('00000000-0000-0000-0000-00000000beef', 'kb', 'bob',"
            " 'owner', '{admin}')")
        conn.execute("UPDATE memory_receipts SET principal = 'bob' WHERE receipt_id = %s",
                     (made["receipt_id"],))
        conn.execute("UPDATE memory_candidates SET state = 'pending', consumed_by = NULL,"
                     " proposed = '{\"text\": \"a\"}' WHERE candidate_id = %s",
                     (captured[0],))  # a dismissed candidate brought back for review
        conn.execute("DELETE FROM memory_receipts WHERE receipt_id = %s",
                     (receipts[1]["receipt_id"],))  # the freeze's: its key could be replayed
        vanished = records[1][2]["refs"][0]  # the other grant: gone (issue 37 item 13)
        conn.execute("DELETE FROM memory_grants WHERE grant_id = %s", (vanished,))
    named = {(m["kind"], m["id"], m["problem"], tuple(m["fields"]))
             for m in (await team.call("owner", "GET", "/v1/audit/verify?deep=true")).body[
                 "deep"]["mismatches"]}
    assert named == {
        ("grant", granted["refs"][0], "changed", ("revoked_at",)),
        ("grant", "00000000-0000-0000-0000-00000000beef", "missing_event", ()),
        ("space", "kb", "changed", ("frozen",)),
        ("subject", "kb/u1", "changed", ("fenced_context_ids",)),
        ("receipt", made["receipt_id"], "changed", ("principal",)),
        ("receipt", receipts[1]["receipt_id"], "missing_row", ()),
        ("grant", vanished, "missing_row", ()),
        ("candidate", captured[0], "changed", ("consumed_by", "proposed_sha256", "state")),
    }
