"""``POST /v1/spoke/memory`` on a real server and PostgreSQL, agents with real tokens:
the capability gate, describe, spaces (first use, freeze), subjects, grants (issuing within
coverage, revoke re-checked on the next op), records (CAS, tombstones), receipts and the
durable idempotency of every mutating op (one effect for twenty concurrent requests)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.waiting import Pending, await_until

from attested_cortex.bundles import manifests
from attested_cortex.bundles.errors import BundleError
from attested_cortex.service.pipeline.calls import STEPS
from attested_cortex.service.pipeline.operations import SPOKE_MEMORY
from attested_cortex.service.resources.spoke.dispatch import HANDLERS
from attested_cortex.spoke.operations import MEMORY_OPS
from tests.server.test_permissions_api import Agents, agents
from tests.server.test_pipeline import runs, tracing
from tests.support.cortex import MakeCortex, Reply
from tests.support.forwarder import Forwarder

OWNER = "memory.override,memory.write,memory.read,memory.forget,audit.read"
PATH = "/v1/spoke/memory"
REFLECTING = "spoke-memory, spoke-memory-reflection"


async def op(team: Agents, who: str, name: str, request: dict[str, Any], *,
             key: str | None = None, flags: str | None = None) -> Reply:
    body: dict[str, Any] = {"op": name, "request": request}
    if key is not None:
        body["idempotency_key"] = key
    headers = {"X-Spoke-Capabilities": flags} if flags is not None else {}
    return await team.call(who, "POST", PATH, body, **headers)


async def ok(team: Agents, who: str, name: str, request: dict[str, Any],
             **more: Any) -> Any:
    reply = await op(team, who, name, request, **more)
    assert reply.status == 200, reply.text
    return reply.body


def refused(reply: Reply, status: int, code: str) -> dict[str, Any]:
    assert reply.status == status and reply.body["error"]["code"] == code, reply.text
    found: dict[str, Any] = reply.body["error"]
    return found


@pytest.fixture
async def team(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> Agents:
    return await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "alice": "", "bob": "", "reader": "memory.read"})


async def seeded(team: Agents) -> None:
    """Space ``kb`` with subject ``u1``; alice may read/write u1 in context c1 and grant."""
    await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1",
                                                      "kind": "person:human"})
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
        "context_ids": ["c1"], "capabilities": ["records_read", "records_write", "grants"]})


async def test_the_capability_gate_runs_before_any_handler(team: Agents) -> None:
    described = await ok(team, "alice", "memory.describe", {})
    assert described["served_flags"] == ["spoke-memory", "spoke-memory-reflection",
                                         "spoke-memory-transfer"]
    assert described["protocol_version"] and described["engine_policy_version"]
    gated = refused(await op(team, "alice", "memory.exports.create", {"space_id": "x"}),
                    400, "capability_missing")
    assert gated["details"]["required"] == "spoke-memory-transfer"
    # negotiated: past the gate, to the grant check
    refused(await op(team, "alice", "memory.exports.create", {"space_id": "kb"},
                     flags="spoke-memory, spoke-memory-transfer"), 403, "grant_missing")
    refused(await op(team, "alice", "memory.describe", {}, flags="spoke-memory-transfer"),
            400, "invalid_input")
    refused(await op(team, "alice", "memory.nothing", {}), 400, "unknown_op")
    bad = refused(await op(team, "alice", "memory.records.list",
                           {"space_id": "kb", "cognition_filter": {"kind": "x"}}),
                  400, "invalid_input")
    assert bad["details"]["reason"] == "unsupported_cognition_requirement"
    refused(await op(team, "alice", "memory.subjects.get", {"space_id": "../x",
                                                            "subject_id": "u"}),
            400, "invalid_input")
    refused(await op(team, "alice", "memory.describe", {"extra": 1}), 400, "invalid_input")
    assert (await team.call("alice", "POST", PATH, {"op": "memory.describe"},
                            Authorization="Bearer nope")).status == 401


async def test_spaces_subjects_and_freeze(team: Agents) -> None:
    refused(await op(team, "alice", "memory.subjects.ensure", {
        "space_id": "kb", "subject_id": "u1"}), 403, "grant_missing")
    await seeded(team)
    spaces = (await ok(team, "owner", "memory.spaces.list", {}))["spaces"]
    assert [(s["space_id"], s["revision"], s["frozen"], s["pending_receipts"])
            for s in spaces] == [("kb", 2, False, 0)]  # a grant change bumps the revision
    assert [s["space_id"] for s in (await ok(team, "alice", "memory.spaces.list", {}))[
        "spaces"]] == ["kb"]
    assert (await ok(team, "bob", "memory.spaces.list", {}))["spaces"] == []
    subject = await ok(team, "alice", "memory.subjects.get", {"space_id": "kb",
                                                              "subject_id": "u1"})
    assert subject["state"] == "active" and subject["kind"] == "person:human"
    refused(await op(team, "alice", "memory.subjects.get", {"space_id": "kb",
                                                            "subject_id": "u2"}),
            403, "grant_missing")
    refused(await op(team, "owner", "memory.subjects.get", {"space_id": "kb",
                                                            "subject_id": "u2"}),
            404, "subject_not_found")
    refused(await op(team, "owner", "memory.subjects.ensure", {
        "space_id": "kb", "subject_id": "u1", "kind": "person:bot"}), 409,
        "subject_kind_mismatch")
    refused(await op(team, "alice", "memory.spaces.freeze", {"space_id": "kb"}), 403,
            "grant_missing")
    refused(await op(team, "owner", "memory.spaces.freeze", {"space_id": "kb",
                                                             "expected_revision": 9}),
            409, "revision_conflict")
    frozen = await ok(team, "owner", "memory.spaces.freeze", {"space_id": "kb",
                                                              "expected_revision": 2})
    assert frozen["status"] == "committed" and frozen["revision"] == 3
    refused(await op(team, "owner", "memory.spaces.freeze", {"space_id": "kb"}), 409,
            "space_frozen")
    record = {"space_id": "kb", "subject_id": "u1", "content": {"text": "x"},
              "placement": {"context_id": "c1"}}
    refused(await op(team, "alice", "memory.records.create", record), 409, "space_frozen")
    await ok(team, "alice", "memory.subjects.get", {"space_id": "kb", "subject_id": "u1"})
    await ok(team, "owner", "memory.spaces.unfreeze", {"space_id": "kb"})
    refused(await op(team, "owner", "memory.spaces.unfreeze", {"space_id": "kb"}), 409,
            "space_not_frozen")
    # fences: a subject, then one context of it
    await ok(team, "owner", "memory.subjects.fence", {"space_id": "kb", "subject_id": "u1",
                                                      "action": "fence_context",
                                                      "context_id": "c1"})
    refused(await op(team, "alice", "memory.records.create", record), 409, "context_fenced")
    await ok(team, "owner", "memory.subjects.fence", {"space_id": "kb", "subject_id": "u1",
                                                      "action": "unfence_context",
                                                      "context_id": "c1"})
    await ok(team, "owner", "memory.subjects.fence", {"space_id": "kb", "subject_id": "u1",
                                                      "action": "fence"})
    refused(await op(team, "alice", "memory.records.create", record), 409, "subject_fenced")
    await ok(team, "owner", "memory.subjects.fence", {"space_id": "kb", "subject_id": "u1",
                                                      "action": "unfence"})
    await ok(team, "alice", "memory.records.create", record)
    refused(await op(team, "reader", "memory.records.create", record), 403, "scope_denied")
    refused(await op(team, "alice", "memory.subjects.get", {"space_id": "nowhere",
                                                            "subject_id": "u1"}),
            403, "grant_missing")


async def test_grants_stay_within_coverage_and_revoke_is_terminal(team: Agents) -> None:
    await seeded(team)
    within = {"space_id": "kb", "principal_id": "bob", "subject_ids": ["u1"],
              "context_ids": ["c1"], "capabilities": ["records_read"]}
    for wider in ({"capabilities": ["records_read", "admin"]}, {"subject_ids": None},
                  {"context_ids": ["c1", "c2"]}, {"shared_access": True}):
        refused(await op(team, "alice", "memory.grants.grant", {**within, **wider}), 403,
                "grant_amplification")
    refused(await op(team, "alice", "memory.grants.grant", {
        **within, "expires_at": "2001-01-01T00:00:00Z"}), 400, "invalid_input")
    receipt = await ok(team, "alice", "memory.grants.grant", within)
    grant_id = receipt["refs"][0]
    mine = (await ok(team, "bob", "memory.grants.list", {"space_id": "kb"}))["grants"]
    assert [(g["grant_id"], g["issued_by"], g["capabilities"]) for g in mine] == [
        (grant_id, "alice", ["records_read"])]
    refused(await op(team, "bob", "memory.grants.list", {"space_id": "kb", "view": "admin"}),
            403, "grant_missing")
    assert len((await ok(team, "owner", "memory.grants.list", {
        "space_id": "kb", "view": "admin"}))["grants"]) == 2
    made = await ok(team, "alice", "memory.records.create", {
        "space_id": "kb", "subject_id": "u1", "content": {"text": "secret"},
        "placement": {"context_id": "c1"}})
    ref = {"space_id": "kb", "record_id": made["refs"][0]}
    assert (await ok(team, "bob", "memory.records.get", ref))["content"] == {"text": "secret"}
    refused(await op(team, "bob", "memory.grants.revoke", {"space_id": "kb",
                                                           "grant_id": grant_id}),
            403, "grant_missing")
    await ok(team, "alice", "memory.grants.revoke", {"space_id": "kb", "grant_id": grant_id})
    refused(await op(team, "bob", "memory.records.get", ref), 404, "record_not_found")
    refused(await op(team, "owner", "memory.grants.revoke", {"space_id": "kb",
                                                             "grant_id": grant_id}),
            409, "grant_revoked")
    refused(await op(team, "owner", "memory.grants.revoke", {
        "space_id": "kb", "grant_id": "00000000-0000-0000-0000-000000000000"}), 404,
        "grant_not_found")
    # an expired grant stops the next op like a revoked one
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "bob", "capabilities": ["records_read"],
        "expires_at": soon})
    assert (await op(team, "bob", "memory.records.get", ref)).status == 200

    async def expired() -> bool | Pending:
        reply = await op(team, "bob", "memory.records.get", ref)
        return reply.status == 404 or Pending(reply.status)

    await await_until(expired, seconds=15, what="bob's grant expired")


async def test_records_cas_tombstones_and_native_visibility(team: Agents) -> None:
    await seeded(team)
    cognition = [{"view": "recorded_at", "kind": "belief", "attribution": "u1",
                  "basis": "said so", "recorded_at": "2026-12-01T00:00:00Z"}]
    create = {"space_id": "kb", "subject_id": "u1", "kind": "note:fact",
              "content": {"text": "likes tea", "structured": {"drink": "tea"},
                          "cognition": []},
              "placement": {"context_id": "c1"}, "source_context_id": "chat-7"}
    receipt = await ok(team, "alice", "memory.records.create", create)
    assert receipt["status"] == "committed" and receipt["revision"] == 1
    assert "likes tea" not in str(receipt)  # content-free
    ref = {"space_id": "kb", "record_id": receipt["refs"][0]}
    record = await ok(team, "alice", "memory.records.get", ref)
    assert record["content"] == create["content"] and record["revision"] == 1
    assert record["provenance"] == {"source_context_id": "chat-7", "captured_by": "alice",
                                    "candidate_id": None}
    # the record is a memory: the chain and the space authority's native reads see it; a
    # grantee (its author here) reads it through the family only (ADR 0083)
    native = await team.call("owner", "GET", f"/v1/memories/{ref['record_id']}")
    assert native.status == 200 and native.body["namespace"] == "kb"
    assert (await team.call("alice", "GET", f"/v1/memories/{ref['record_id']}")).status == 404
    bad = refused(await op(team, "alice", "memory.records.create", {
        **create, "content": {"text": "x", "cognition": [{"view": "now"}]}}), 400,
        "invalid_input")
    assert bad["details"]["reason"] == "invalid_cognition_record"
    refused(await op(team, "alice", "memory.records.create", {
        **create, "placement": {"context_id": "c2"}}), 403, "grant_missing")
    refused(await op(team, "alice", "memory.records.create", {
        **create, "subject_id": "u9"}), 403, "grant_missing")
    refused(await op(team, "owner", "memory.records.create", {
        **create, "subject_id": "u9"}), 404, "subject_not_found")
    update = {**ref, "expected_revision": 1, "content": {"text": "likes coffee",
                                                         "cognition": cognition}}
    assert (await ok(team, "alice", "memory.records.update", update))["revision"] == 2
    refused(await op(team, "alice", "memory.records.update", update), 409,
            "revision_conflict")
    updated = await ok(team, "alice", "memory.records.get", ref)
    assert updated["content"] == {"text": "likes coffee", "cognition": cognition}
    assert updated["kind"] == "note:fact"
    refused(await op(team, "alice", "memory.records.delete", {**ref, "expected_revision": 1}),
            409, "revision_conflict")
    await ok(team, "alice", "memory.records.delete", {**ref, "expected_revision": 2})
    tomb = await ok(team, "alice", "memory.records.get", ref)
    assert tomb["content"] == {"text": ""} and tomb["tombstone"] is True
    refused(await op(team, "alice", "memory.records.update", {**update,
                                                              "expected_revision": 3}),
            409, "record_deleted")
    audit = await team.call("owner", "GET", "/v1/audit/verify")
    # three memory write records and five op records (ensure, grant, create, update,
    # delete; ADR 0067): refused ops leave none
    assert audit.body["ok"] is True and audit.body["events"] == 8, audit.text


async def test_receipts_are_durable_and_keyed_per_space_principal_op(
    team: Agents, make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    await seeded(team)
    create = {"space_id": "kb", "subject_id": "u1", "content": {"text": "once"},
              "placement": {"context_id": "c1"}}
    replies = await asyncio.gather(*(op(team, "alice", "memory.records.create", create,
                                        key="k-1") for _ in range(20)))
    assert {r.status for r in replies} == {200}, [r.text for r in replies if r.status != 200]
    assert len({r.text for r in replies}) == 1  # twenty identical receipts
    receipt = replies[0].body
    with psycopg.connect(migrated_pg15_dsn) as conn:
        count = conn.execute("SELECT count(*) FROM memory_records").fetchone()
    assert count is not None and count[0] == 1  # one effect
    refused(await op(team, "alice", "memory.records.create",
                     {**create, "content": {"text": "twice?"}}, key="k-1"),
            409, "idempotency_key_reused")
    # the Idempotency-Key header is the same key when the body names none
    header = await team.call("alice", "POST", PATH, {"op": "memory.records.create",
                                                     "request": create},
                             **{"Idempotency-Key": "k-1"})
    assert header.status == 200 and header.body == receipt, header.text
    # the same key is another request for another principal or op
    other = await ok(team, "owner", "memory.records.create", create, key="k-1")
    assert other["receipt_id"] != receipt["receipt_id"]
    got = await ok(team, "alice", "memory.receipts.get", {
        "space_id": "kb", "receipt_id": receipt["receipt_id"]})
    assert got == receipt
    refused(await op(team, "bob", "memory.receipts.get", {
        "space_id": "kb", "receipt_id": receipt["receipt_id"]}), 404, "receipt_not_found")
    # a refused request leaves its key free
    refused(await op(team, "alice", "memory.records.create",
                     {**create, "placement": {"context_id": "c2"}}, key="k-2"), 403,
            "grant_missing")
    await ok(team, "alice", "memory.records.create", create, key="k-2")
    # forever: a new server on the same database answers the same receipt
    (tmp_path / "again").mkdir()
    again = await agents(make_cortex, migrated_pg15_dsn, tmp_path / "again",
                         {"alice": ""})
    assert await ok(again, "alice", "memory.records.create", create, key="k-1") == receipt


async def test_every_served_op_runs_every_pipeline_step(team: Agents) -> None:
    trace = tracing(team.client)
    await seeded(team)
    space, subject = {"space_id": "kb"}, {"space_id": "kb", "subject_id": "u1"}
    made = await ok(team, "alice", "memory.records.create", {
        **subject, "content": {"text": "t"}, "placement": {"context_id": "c1"}})
    ref = {**space, "record_id": made["refs"][0]}
    granted = await ok(team, "owner", "memory.grants.grant", {
        **space, "principal_id": "bob", "capabilities": ["records_read"]})
    for who, name, request in [
        ("alice", "memory.describe", {}), ("alice", "memory.spaces.list", {}),
        ("owner", "memory.spaces.freeze", space), ("owner", "memory.spaces.unfreeze", space),
        ("alice", "memory.subjects.get", subject),
        ("owner", "memory.subjects.fence", {**subject, "action": "fence_context",
                                            "context_id": "c9"}),
        ("alice", "memory.grants.list", space),
        ("owner", "memory.grants.revoke", {**space, "grant_id": granted["refs"][0]}),
        ("alice", "memory.records.get", ref),
        ("alice", "memory.records.update", {**ref, "expected_revision": 1,
                                            "kind": "note:x"}),
        ("alice", "memory.records.delete", {**ref, "expected_revision": 2}),
        ("alice", "memory.receipts.get", {**space, "receipt_id": made["receipt_id"]}),
        ("owner", "memory.records.list", space),
        ("owner", "memory.recall", {**space, "query": "t"}),
        ("owner", "memory.profile.update", {**subject, "kind": "style", "text": "brief"}),
        ("owner", "memory.profile.get", subject),
    ]:
        await ok(team, who, name, request)
    other = await ok(team, "owner", "memory.records.create", {
        **subject, "content": {"text": "u"}, "placement": {"context_id": "c1"}})
    await ok(team, "owner", "memory.records.promote", {
        **space, "record_id": other["refs"][0], "expected_revision": 1,
        "placement": {"shared": True}})
    captured = (await ok(team, "owner", "memory.capture", {
        **subject, "capture_scope": {"shared": True},
        "items": [{"text": "a"}, {"text": "b"}]}))["refs"]
    await ok(team, "owner", "memory.candidates.list", space)
    await ok(team, "owner", "memory.candidates.get", {**space, "candidate_id": captured[0]})
    await ok(team, "owner", "memory.candidates.dismiss", {**space,
                                                          "candidate_id": captured[0]})
    await ok(team, "owner", "memory.candidates.review", {
        **space, "candidate_id": captured[1], "decision": "drop"})
    for name in ("memory.reflections.generate", "memory.reflections.state",
                 "memory.reflections.list"):
        await ok(team, "owner", name, subject, flags=REFLECTING)
    full = {op for op, steps in runs(trace) if steps == STEPS}
    assert full == {SPOKE_MEMORY[name].name for name in HANDLERS
                    if MEMORY_OPS[name].flag != "spoke-memory-transfer"}  # and below


async def test_capture_then_review_is_the_only_candidate_path(team: Agents) -> None:
    await seeded(team)
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "bob", "subject_ids": ["u1"], "context_ids": ["c1"],
        "capabilities": ["capture"]})
    scope = {"context_id": "c1"}
    shown = {"shared": False, "context_id": "c1"}  # a placement is answered in full
    captured = await ok(team, "bob", "memory.capture", {
        "space_id": "kb", "subject_id": "u1", "capture_scope": scope,
        "items": [{"text": "I prefer tea"}, {"text": "met at noon"}, {"text": "raw"}]})
    tea, noon, raw = captured["refs"]
    listed = (await ok(team, "bob", "memory.candidates.list", {"space_id": "kb"}))["candidates"]
    assert [(c["classification"], c["capture_scope"]) for c in listed] == [
        ("preference", shown), ("episodic", shown), ("episodic", shown)]
    refused(await op(team, "bob", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": tea, "decision": "promote"}), 403, "grant_missing")
    refused(await op(team, "alice", "memory.candidates.get", {
        "space_id": "kb", "candidate_id": tea}), 404, "candidate_not_found")
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
        "context_ids": ["c1"], "capabilities": ["review"]})
    promoted = await ok(team, "alice", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": tea, "decision": "promote",
        "content_override": {"text": "prefers green tea"}})
    record = await ok(team, "alice", "memory.records.get", {
        "space_id": "kb", "record_id": promoted["refs"][1]})
    assert record["content"] == {"text": "prefers green tea"}
    assert record["placement"] == shown and record["provenance"]["candidate_id"] == tea
    refused(await op(team, "alice", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": tea, "decision": "drop"}), 409, "candidate_consumed")
    refused(await op(team, "alice", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": noon, "decision": "fragment"}), 400, "invalid_input")
    bad = refused(await op(team, "alice", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": noon, "decision": "fragment",
        "fragments": [{"text": "ok"}, {"text": "x", "cognition": [{"view": "then"}]}]}),
        400, "invalid_input")
    assert bad["details"]["reason"] == "invalid_cognition_record"
    fragmented = await ok(team, "alice", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": noon, "decision": "fragment",
        "fragments": [{"text": "met"}, {"text": "at noon"}]})
    assert len(fragmented["refs"]) == 3
    await ok(team, "alice", "memory.candidates.dismiss", {"space_id": "kb",
                                                          "candidate_id": raw})
    consumed = await ok(team, "bob", "memory.candidates.get", {"space_id": "kb",
                                                               "candidate_id": raw})
    assert consumed["state"] == "dismissed" and consumed["proposed"] == {"text": ""}
    assert (await ok(team, "bob", "memory.candidates.list", {"space_id": "kb"}))[
        "candidates"] == []


async def test_listing_recall_promote_and_profiles(team: Agents) -> None:
    await seeded(team)
    await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u2"})
    made = []
    for subject, placement, source, text in [
        ("u1", {"context_id": "c1"}, "chat-1", "tea in the morning"),
        ("u1", {"context_id": "c2"}, "chat-2", "tea at night"),
        ("u1", {"shared": True}, "chat-1", "coffee never"),
        ("u2", {"context_id": "c1"}, "chat-1", "tea for two"),
    ]:
        made.append((await ok(team, "owner", "memory.records.create", {
            "space_id": "kb", "subject_id": subject, "content": {"text": text},
            "placement": placement, "source_context_id": source}))["refs"][0])
    everything = await ok(team, "owner", "memory.records.list", {"space_id": "kb"})
    assert everything["total_authorized"] == 4
    mine = await ok(team, "alice", "memory.records.list", {"space_id": "kb", "limit": 1})
    assert mine["total_authorized"] == 1 and [r["record_id"] for r in mine["records"]] == [
        made[0]] and mine["next"] is None
    shared = await ok(team, "owner", "memory.records.list", {
        "space_id": "kb", "selection": {"mode": "contexts_and_shared", "context_ids": ["c2"]},
        "provenance": {"source_context_ids": ["chat-1"]}})
    assert [r["record_id"] for r in shared["records"]] == [made[2]]
    first = await ok(team, "owner", "memory.records.list", {"space_id": "kb", "limit": 2})
    second = await ok(team, "owner", "memory.records.list", {
        "space_id": "kb", "limit": 2, "cursor": first["next"]})
    assert [r["record_id"] for r in first["records"] + second["records"]] == made
    # a recall shows records: it needs records_read where it recalls too (ADR 0082)
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "bob", "capabilities": ["recall", "records_read"]})
    refused(await op(team, "owner", "memory.records.list", {
        "space_id": "kb", "limit": 2, "cursor": first["next"]}), 409, "cursor_invalid")
    # recall needs the recall capability: alice's records_read does not give it
    assert (await ok(team, "alice", "memory.recall", {"space_id": "kb", "query": "tea"}))[
        "results"] == []
    hits = await ok(team, "bob", "memory.recall", {"space_id": "kb", "query": "tea",
                                                   "selection": {"mode": "contexts",
                                                                 "context_ids": ["c1"]}})
    assert {h["record"]["record_id"] for h in hits["results"]} == {made[0], made[3]}
    hits = await ok(team, "bob", "memory.recall", {"space_id": "kb", "query": "tea",
                                                   "budget_tokens": 4})
    assert len(hits["results"]) == 1 and hits["truncated"] is True
    # promote: a placement change, CAS, within the writer's coverage at both ends
    promote = {"space_id": "kb", "record_id": made[0], "expected_revision": 1,
               "placement": {"shared": True}}
    refused(await op(team, "alice", "memory.records.promote", promote), 403, "grant_missing")
    assert (await ok(team, "owner", "memory.records.promote", promote))["revision"] == 2
    refused(await op(team, "owner", "memory.records.promote", promote), 409,
            "revision_conflict")
    # profiles: authored, honest-empty for absent kinds, CAS on the revision
    refused(await op(team, "alice", "memory.profile.get", {
        "space_id": "kb", "subject_id": "u1"}), 403, "grant_missing")
    empty = await ok(team, "owner", "memory.profile.get", {
        "space_id": "kb", "subject_id": "u1", "kinds": ["personality"]})
    assert empty["documents"][0]["revision"] == 0 and empty["documents"][0]["text"] == ""
    update = {"space_id": "kb", "subject_id": "u1", "kind": "personality", "text": "calm",
              "expected_revision": 0}
    assert (await ok(team, "owner", "memory.profile.update", update))["revision"] == 1
    refused(await op(team, "owner", "memory.profile.update", update), 409,
            "revision_conflict")
    docs = (await ok(team, "owner", "memory.profile.get", {
        "space_id": "kb", "subject_id": "u1"}))["documents"]
    assert [(d["kind"], d["text"], d["revision"]) for d in docs] == [("personality", "calm", 1)]


async def test_a_lost_commit_answer_is_answered_once_by_its_receipt(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    port = int(migrated_pg15_dsn.rsplit(":", 1)[1].split("/")[0])
    service = await Forwarder(port).start()
    try:
        team = await agents(make_cortex, migrated_pg15_dsn.replace(
            f":{port}/", f":{service.port}/"), tmp_path, {"owner": OWNER})
        await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb",
                                                          "subject_id": "u1"})
        create = {"space_id": "kb", "subject_id": "u1", "content": {"text": "unanswered"},
                  "placement": {"shared": True}}
        service.lose_next_commit_ack()
        lost = await op(team, "owner", "memory.records.create", create, key="lost-1")
        assert service.lost_acks == 1
        assert lost.status == 503 and lost.headers["Retry-After"] == "1", lost.text
        retried = await ok(team, "owner", "memory.records.create", create, key="lost-1")
        assert await ok(team, "owner", "memory.records.create", create, key="lost-1") == retried
        with psycopg.connect(migrated_pg15_dsn) as conn:
            ids = conn.execute("SELECT memory_id::text FROM memory_records").fetchall()
        assert ids == [(retried["refs"][0],)]
    finally:
        await service.close()


async def test_records_count_in_their_authors_storage_quota(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        quotas={"storage_per_agent_bytes": 100, "enabled": False})
    await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1"})
    create = {"space_id": "kb", "subject_id": "u1", "content": {"text": "x" * 60},
              "placement": {"shared": True}}
    await ok(team, "owner", "memory.records.create", create, key="q-1")
    refused(await op(team, "owner", "memory.records.create", create, key="q-2"), 413,
            "storage_quota_exceeded")
    with psycopg.connect(migrated_pg15_dsn) as conn:
        count = conn.execute("SELECT count(*) FROM memory_records").fetchone()
        keys = conn.execute("SELECT count(*) FROM memory_receipts WHERE idempotency_key = 'q-2'"
                            ).fetchone()
    assert count == (1,) and keys == (0,)  # nothing written, the key left free


async def test_reflections_over_a_pinned_basis_read_stale_after_a_change(team: Agents) -> None:
    await seeded(team)
    subject = {"space_id": "kb", "subject_id": "u1"}
    refused(await op(team, "alice", "memory.reflections.state", subject), 400,
            "capability_missing")
    refused(await op(team, "alice", "memory.reflections.state", subject, flags=REFLECTING),
            403, "grant_missing")
    empty = await ok(team, "owner", "memory.reflections.state", subject, flags=REFLECTING)
    assert empty["data_sufficient"] is False and empty["stale"] is True
    assert empty["missing_required_kinds"] == []
    refused(await op(team, "owner", "memory.reflections.generate", subject, flags=REFLECTING),
            409, "insufficient_data")
    made = await ok(team, "owner", "memory.records.create", {
        **subject, "content": {"text": "Walks at dawn. Every day."},
        "placement": {"context_id": "c1"}})
    await ok(team, "owner", "memory.profile.update", {**subject, "kind": "personality",
                                                      "text": "Calm and curious."})
    receipt = await ok(team, "owner", "memory.reflections.generate", subject,
                       flags=REFLECTING, key="r-1")
    assert receipt["status"] == "committed"
    state = await ok(team, "owner", "memory.reflections.state", subject, flags=REFLECTING)
    assert state["stale"] is False and state["data_sufficient"] is True
    [reflection] = (await ok(team, "owner", "memory.reflections.list", subject,
                             flags=REFLECTING))["reflections"]
    assert reflection["text"] == "About u1:\npersonality: Calm and curious.\n- Walks at dawn."
    assert reflection["state_digest"] == state["state_digest"] and not reflection["stale"]
    assert reflection["basis"]["records"] == [{"record_id": made["refs"][0], "revision": 1}]
    assert reflection["basis"]["profile_revisions"] == {"personality": 1}
    await ok(team, "owner", "memory.records.update", {
        "space_id": "kb", "record_id": made["refs"][0], "expected_revision": 1,
        "content": {"text": "Walks at dusk."}})
    later = await ok(team, "owner", "memory.reflections.list", subject, flags=REFLECTING)
    assert later["reflections"][0]["stale"] is True
    bad = refused(await op(team, "owner", "memory.reflections.generate", {
        **subject, "cognition_filter": {}}, flags=REFLECTING), 400, "invalid_input")
    assert bad["details"]["reason"] == "unsupported_cognition_requirement"


TRANSFER = "spoke-memory, spoke-memory-transfer"


async def test_export_then_staged_import_activates_atomically(team: Agents) -> None:
    trace = tracing(team.client)
    await seeded(team)
    src, dst = {"space_id": "kb"}, {"space_id": "kb2"}
    for content, placement in [({"text": "long " * 600}, {"context_id": "c1"}),
                               ({"text": "short", "cognition": []}, {"shared": True})]:
        await ok(team, "owner", "memory.records.create", {
            **src, "subject_id": "u1", "content": content, "placement": placement})
    await ok(team, "owner", "memory.profile.update", {**src, "subject_id": "u1",
                                                      "kind": "style", "text": "terse"})
    refused(await op(team, "alice", "memory.exports.create", src, flags=TRANSFER), 403,
            "grant_missing")
    made = await ok(team, "owner", "memory.exports.create", {**src, "chunk_bytes": 1024},
                    flags=TRANSFER)
    export_id, chunks = made["refs"][0], []
    while not chunks or not chunks[-1]["final"]:
        chunks.append(await ok(team, "owner", "memory.exports.get", {
            **src, "export_id": export_id, "ordinal": len(chunks)}, flags=TRANSFER))
    assert len(chunks) == 9 and len({c["manifest_digest"] for c in chunks}) == 1
    bundle = space_bundle(chunks)  # the logical bundle's container, kind space (ADR 0070)
    manifest = bundle.pop("manifest.json")
    assert hashlib.sha256(manifest).hexdigest() == chunks[0]["manifest_digest"]
    assert json.loads(manifest)["kind"] == "space" and sorted(bundle) == [
        "chunks/space_profiles-000000.jsonl", "chunks/space_records-000000.jsonl",
        "chunks/space_subjects-000000.jsonl"]
    with pytest.raises(BundleError) as wrong:  # never imported as a whole cortex
        manifests.parse(manifest)
    assert wrong.value.what == "wrong_kind"
    # a narrower transfer grant reads no export of someone else's
    await ok(team, "owner", "memory.grants.grant", {
        **src, "principal_id": "bob", "capabilities": ["transfer"], "subject_ids": ["u9"]})
    refused(await op(team, "bob", "memory.exports.get", {
        **src, "export_id": export_id, "ordinal": 0}, flags=TRANSFER), 404,
        "export_chunk_not_found")

    def stage(chunk: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {**dst, "import_id": IMPORT, "ordinal": chunk["ordinal"],
                "final": chunk["final"], "data": chunk["data"], "digest": chunk["digest"],
                **more}

    async def staging(body: dict[str, Any]) -> Reply:
        return await op(team, "owner", "memory.imports.stage", body, flags=TRANSFER)

    refused(await staging(stage(chunks[1])), 409, "import_gap")
    refused(await staging(stage(chunks[0], digest=chunks[1]["digest"])), 400, "chunk_corrupt")
    await ok(team, "owner", "memory.imports.stage", stage(chunks[0]), flags=TRANSFER)
    refused(await staging(stage(chunks[0])), 409, "chunk_replayed")
    refused(await staging(stage(chunks[2])), 409, "import_gap")
    for chunk in chunks[1:-1]:
        await ok(team, "owner", "memory.imports.stage", stage(chunk), flags=TRANSFER)
    refused(await op(team, "owner", "memory.imports.activate", {**dst, "import_id": IMPORT},
                     flags=TRANSFER), 409, "import_not_verified")
    digest = chunks[0]["manifest_digest"]
    refused(await staging(stage(chunks[-1], manifest_digest="0" * 64)), 409,
            "manifest_mismatch")
    await ok(team, "owner", "memory.imports.stage", stage(chunks[-1], manifest_digest=digest),
             flags=TRANSFER)
    assert (await ok(team, "owner", "memory.records.list", dst))["total_authorized"] == 0
    # activating writes only within the activator's transfer coverage (bob: subject u9)
    await ok(team, "owner", "memory.grants.grant", {
        **dst, "principal_id": "bob", "capabilities": ["transfer"], "subject_ids": ["u9"]})
    refused(await op(team, "bob", "memory.imports.activate", {**dst, "import_id": IMPORT},
                     flags=TRANSFER), 403, "grant_missing")
    activated = await ok(team, "owner", "memory.imports.activate",
                         {**dst, "import_id": IMPORT}, flags=TRANSFER)
    assert activated["status"] == "committed" and activated["revision"] == 2
    copied = (await ok(team, "owner", "memory.records.list", dst))["records"]
    original = (await ok(team, "owner", "memory.records.list", src))["records"]
    assert [(r["content"], r["placement"]) for r in copied] == [
        (r["content"], r["placement"]) for r in original]
    assert copied[1]["content"] == {"text": "short", "cognition": []}
    docs = (await ok(team, "owner", "memory.profile.get", {**dst, "subject_id": "u1"}))[
        "documents"]
    assert [(d["kind"], d["text"]) for d in docs] == [("style", "terse")]
    refused(await op(team, "owner", "memory.imports.discard", {**dst, "import_id": IMPORT},
                     flags=TRANSFER), 409, "import_not_staging")
    # a discard before activation drops what was staged
    other = {**stage(chunks[0]), "import_id": OTHER}
    await ok(team, "owner", "memory.imports.stage", other, flags=TRANSFER)
    await ok(team, "owner", "memory.imports.discard", {**dst, "import_id": OTHER},
             flags=TRANSFER)
    refused(await staging({**stage(chunks[1]), "import_id": OTHER}), 409,
            "import_not_staging")
    # a chunk changed with its wire digest recomputed passes staging, not the manifest
    data = bytearray(base64.b64decode(chunks[0]["data"]))
    data[data.index(b"person:human")] = ord("P")
    forged = {**chunks[0], "data": base64.b64encode(bytes(data)).decode(),
              "digest": hashlib.sha256(bytes(data)).hexdigest()}
    for chunk in [forged, *chunks[1:-1]]:
        await ok(team, "owner", "memory.imports.stage", {**stage(chunk), "import_id": FORGED},
                 flags=TRANSFER)
    bad = refused(await staging({**stage(chunks[-1], manifest_digest=digest),
                                 "import_id": FORGED}), 409, "bundle_invalid")
    assert bad["details"]["what"] == "digest_mismatch"
    full = {op for op, steps in runs(trace) if steps == STEPS}
    assert {SPOKE_MEMORY[name].name for name, declared in MEMORY_OPS.items()
            if declared.flag == "spoke-memory-transfer"} <= full


IMPORT = "00000000-0000-4000-8000-000000000001"
OTHER = "00000000-0000-4000-8000-000000000002"
FORGED = "00000000-0000-4000-8000-000000000003"


def space_bundle(chunks: list[dict[str, Any]]) -> dict[str, bytes]:
    """The files of an export's reassembled tar stream, by name."""
    stream = b"".join(base64.b64decode(c["data"]) for c in chunks)
    with tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]
