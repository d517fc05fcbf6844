"""A record's placement is covered by the audit chain (issue 37 item 13, ADR 0087).

``UPDATE memory_records SET context_id = NULL`` as the database owner moves a private record
to the shared placement (a shared-only grantee goes 404 -> 200); the deep audit names the
record ``changed`` on ``context_id``. A whole space deleted behind the server (its space,
subject, grant, receipt, candidate and record side rows) is named ``missing_row`` row by row:
bundles carry every spoke table (ADR 0085), so a vanished space is a deletion. Records
written before op records covered their side rows (simulated: op records without them, and
migration 0032's list naming them) are covered once at the next start, and their placement
is checked from then on. An op refuses to re-record a row changed behind the server
(ADR 0087 section 9); a planted grant is a documented gap (threat model gap 12).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from attested_cortex.attest import cbor
from attested_cortex.attest.spoke_records import record_record
from attested_cortex.service.resources.spoke import audit as spoke_audit
from tests.server.test_keyed_chain import key_file
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

SUBJECT = {"space_id": "kb", "subject_id": "u1"}


async def two_records(team: Agents) -> list[str]:
    """A private (c1) and a shared record; bob may read the shared placement only."""
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "bob", "capabilities": ["records_read"],
        "context_ids": ["c9"], "shared_access": True})
    made = []
    for placement in ({"context_id": "c1"}, {"shared": True}):
        receipt = await ok(team, "owner", "memory.records.create", {
            **SUBJECT, "content": {"text": f"placed {placement}"}, "placement": placement})
        made.append(receipt["refs"][0])
    return made


async def deep(team: Agents) -> dict[str, Any]:
    reply = await team.call("owner", "GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200, reply.text
    return dict(reply.body["deep"])


def moved_to_shared(dsn: str, record_id: str) -> None:
    with psycopg.connect(dsn) as conn:  # the database owner, behind the server
        conn.execute("UPDATE memory_records SET context_id = NULL WHERE memory_id = %s",
                     (record_id,))


async def test_a_placement_changed_behind_the_server_is_named(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "bob": ""})
    private, shared = await two_records(team)
    ref = {"space_id": "kb", "record_id": private}
    assert (await op(team, "bob", "memory.records.get", ref)).status == 404
    report = await deep(team)
    assert report["ok"] and report["spoke"]["record"] == 2, report

    moved_to_shared(migrated_pg15_dsn, private)
    assert (await op(team, "bob", "memory.records.get", ref)).status == 200  # the leak
    report = await deep(team)
    found = [(m["kind"], m["id"], m["problem"], m["fields"]) for m in report["mismatches"]]
    assert found == [("record", private, "changed", ["context_id"])], report
    assert shared not in str(report["mismatches"])


#: A space's own rows, children first (foreign keys), with the deep audit's kind and key.
SPACE_ROWS = [("memory_records", "record", "memory_id::text"),
              ("memory_candidates", "candidate", "candidate_id::text"),
              ("memory_receipts", "receipt", "receipt_id::text"),
              ("memory_grants", "grant", "grant_id::text"),
              ("memory_subjects", "subject", "space_id || '/' || subject_id"),
              ("memory_spaces", "space", "space_id")]


async def test_a_whole_space_deleted_behind_the_server_is_named_row_by_row(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "bob": ""})
    await two_records(team)
    await ok(team, "owner", "memory.capture", {
        **SUBJECT, "capture_scope": {"shared": True}, "items": [{"text": "a candidate"}]})
    assert (await deep(team))["ok"]

    gone = set()
    with psycopg.connect(migrated_pg15_dsn) as conn:  # the database owner, behind the server
        for table, kind, key in SPACE_ROWS:
            for (found,) in conn.execute(f"SELECT {key} FROM {table} WHERE space_id = 'kb'"):
                gone.add((kind, found, "missing_row"))
            conn.execute(f"DELETE FROM {table} WHERE space_id = 'kb'")
    assert {kind for kind, _, _ in gone} == {kind for _, kind, _ in SPACE_ROWS}
    report = await deep(team)
    named = {(m["kind"], m["id"], m["problem"]) for m in report["mismatches"]}
    assert named == gone and not report["ok"], report


async def test_records_from_before_are_covered_once_at_the_next_start(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = migrated_pg15_dsn
    with monkeypatch.context() as before:  # an older release: op records without side rows
        async def none(*_: Any) -> list[Any]:
            return []
        before.setattr(spoke_audit, "_records", none)
        team = await agents(make_cortex, dsn, tmp_path, {"owner": OWNER, "bob": ""})
        private, _ = await two_records(team)
    report = await deep(team)
    assert {(m["problem"], m["kind"]) for m in report["mismatches"]} == {
        ("missing_event", "record")} and report["mismatch_count"] == 2, report
    with psycopg.connect(dsn) as conn:  # what migration 0032 lists at the upgrade
        conn.execute("INSERT INTO spoke_records_to_adopt SELECT memory_id FROM memory_records")

    again = await agents(make_cortex, dsn, tmp_path, {"owner": OWNER, "bob": ""})
    report = await deep(again)
    assert report["ok"], report
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM spoke_records_to_adopt").fetchone() == (0,)
        adopted = conn.execute("SELECT count(*) FROM signed_events WHERE event_type = "
                               "'spoke.memory.records.adopt'").fetchone()
    assert adopted == (1,)  # one per space

    moved_to_shared(dsn, private)
    found = [(m["id"], m["problem"], m["fields"]) for m in (await deep(again))["mismatches"]]
    assert found == [(private, "changed", ["context_id"])]
    with psycopg.connect(dsn) as conn:  # listed again by hand: a covered row is not adopted
        conn.execute("INSERT INTO spoke_records_to_adopt VALUES (%s)", (private,))
    third = await agents(make_cortex, dsn, tmp_path, {"owner": OWNER, "bob": ""})
    found = [(m["id"], m["problem"]) for m in (await deep(third))["mismatches"]]
    assert found == [(private, "changed")]


async def test_gap_a_planted_grant_is_honoured_and_named(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Pins a documented gap (docs/security/threat-model.md, ADR 0087 section 10): reads
    honour a grant row inserted behind the server; the deep audit names it
    ``missing_event``."""
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "bob": ""})
    _, shared = await two_records(team)
    planted = "00000000-0000-0000-0000-00000000beef"
    with psycopg.connect(migrated_pg15_dsn) as conn:  # the database owner, behind the server
        conn.execute("DELETE FROM memory_grants WHERE principal_id = 'bob'")
        conn.execute("INSERT INTO memory_grants (grant_id, space_id, principal_id, issued_by,"
                     " capabilities, shared_access) VALUES (%s, 'kb', 'bob', 'owner',"
                     " '{records_read}', true)", (planted,))
    ref = {"space_id": "kb", "record_id": shared}
    assert (await op(team, "bob", "memory.records.get", ref)).status == 200  # honoured
    named = {(m["kind"], m["id"], m["problem"]) for m in (await deep(team))["mismatches"]}
    assert ("grant", planted, "missing_event") in named, named


#: A column of a recorded row changed behind the server (each undoes what an op recorded:
#: a placement made shared, a grant widened, a fence lifted, a freeze lifted), and the ops
#: that would re-record the row as they find it.
FORGED = [
    ("record", "UPDATE memory_records SET context_id = NULL WHERE context_id = 'c1'",
     ["context_id"]),
    ("grant", "UPDATE memory_grants SET context_ids = NULL WHERE principal_id = 'bob'",
     ["context_ids"]),
    ("subject", "UPDATE memory_subjects SET fenced_context_ids = '{}'",
     ["fenced_context_ids"]),
    ("space", "UPDATE memory_spaces SET frozen = false", ["frozen"]),
]


async def test_an_op_refuses_to_re_record_a_row_changed_behind_the_server(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Issue 37 item 12's class (ADR 0087 section 9): an op that re-records a side row it
    read (records update/promote/delete, grants revoke, subjects fence/ensure, spaces
    freeze) answers 409 ``row_unrecorded`` and writes nothing when the row is not what its
    latest keyed op record left (a matching record forged without the key is none), so the
    deep audit keeps naming the change."""
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "bob": ""},
                        master_key={"file": key_file(tmp_path)}, encryption={"at_rest": False})
    private, shared = await two_records(team)
    fence = {**SUBJECT, "action": "fence_context", "context_id": "c7"}
    await ok(team, "owner", "memory.subjects.fence", fence)
    await ok(team, "owner", "memory.spaces.freeze", {"space_id": "kb"})
    await ok(team, "owner", "memory.spaces.unfreeze", {"space_id": "kb"})
    await ok(team, "owner", "memory.spaces.freeze", {"space_id": "kb"})
    with psycopg.connect(migrated_pg15_dsn) as conn:
        (grant,) = conn.execute("SELECT grant_id::text FROM memory_grants").fetchone() or ()
    assert (await deep(team))["ok"]
    record = {"space_id": "kb", "record_id": private, "expected_revision": 1}
    ops = {"record": [("memory.records.update", {**record, "content": {"text": "edited"}}),
                      ("memory.records.promote", {**record, "placement": {"context_id": "c2"}}),
                      ("memory.records.delete", record)],
           "grant": [("memory.grants.revoke", {"space_id": "kb", "grant_id": grant})],
           "subject": [("memory.subjects.fence", {**fence, "context_id": "c8"}),
                       ("memory.subjects.ensure", SUBJECT)],
           "space": [("memory.spaces.freeze", {"space_id": "kb"})]}
    with psycopg.connect(migrated_pg15_dsn) as conn:  # the database owner, behind the server
        for _, forgery, _ in FORGED:
            conn.execute(forgery)
        forge_record(conn, private)
    head = chain_head(migrated_pg15_dsn)
    for kind, _, fields in FORGED:
        for name, request in ops[kind]:
            error = refused(await op(team, "owner", name, request), 409, "row_unrecorded")
            details = error["details"]  # the record row's forged record is none: no fields
            assert (details["kind"], details["fields"]) == (
                kind, [] if kind == "record" else fields), (name, error)
    assert chain_head(migrated_pg15_dsn) == head  # nothing written
    found = {(m["kind"], m["problem"], tuple(m["fields"]))
             for m in (await deep(team))["mismatches"]}
    assert found == {(kind, "changed", tuple(fields)) for kind, _, fields in FORGED}, found

    with psycopg.connect(migrated_pg15_dsn) as conn:  # as before migration 0037's first start
        conn.execute("DELETE FROM spoke_row_records")
    again = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "bob": ""},
                         master_key={"file": key_file(tmp_path)}, encryption={"at_rest": False})
    await ok(again, "owner", "memory.records.update", {  # its record found again
        "space_id": "kb", "record_id": shared, "expected_revision": 1,
        "content": {"text": "edited"}})


def forge_record(conn: psycopg.Connection[Any], record_id: str) -> None:
    """As the database owner, without the key: append an op record matching the changed
    record row (no MAC) and point migration 0037's index at it."""
    row = conn.cursor(row_factory=dict_row).execute(
        "SELECT * FROM memory_records WHERE memory_id = %s", (record_id,)).fetchone()
    assert row is not None
    payload = {"op": "memory.records.update", "space_id": "kb", "principal": "owner",
               "rows": {"record": [record_record(row)]}}
    (sequence,) = conn.execute(
        "INSERT INTO signed_events (agent_id, event_type, payload) VALUES ('owner',"
        " 'spoke.memory.records.update', %s) RETURNING sequence",
        (cbor.encode(payload),)).fetchone() or ()
    conn.execute("UPDATE spoke_row_records SET sequence = %s WHERE kind = 'record' AND"
                 " key = %s", (sequence, record_id))


def chain_head(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        (head,) = conn.execute("SELECT max(sequence) FROM signed_events").fetchone() or (0,)
    return int(head)


async def test_a_grant_changed_behind_the_server_neither_delegates_nor_is_carried(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """A derived grant widened behind the server stops its parent's revocation (the revoke
    would re-record it), and a parent widened behind the server authorizes no delegation
    (409 ``row_unrecorded`` both; ADR 0087 section 9)."""
    crew = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "alice": "", "bob": "", "carol": ""})
    await ok(crew, "owner", "memory.subjects.ensure", SUBJECT)
    copy = {"space_id": "kb", "principal_id": "alice", "subject_ids": ["u1"],
            "context_ids": ["c1"], "capabilities": ["records_read", "grants"]}
    original = (await ok(crew, "owner", "memory.grants.grant", copy))["refs"][0]
    to_bob = (await ok(crew, "alice", "memory.grants.grant", {
        **copy, "principal_id": "bob"}))["refs"][0]
    widen = "UPDATE memory_grants SET context_ids = NULL WHERE grant_id = %s"
    with psycopg.connect(migrated_pg15_dsn) as conn:  # the database owner, behind the server
        conn.execute(widen, (to_bob,))
    error = refused(await op(crew, "owner", "memory.grants.revoke", {
        "space_id": "kb", "grant_id": original}), 409, "row_unrecorded")
    assert (error["details"]["id"], error["details"]["fields"]) == (to_bob, ["context_ids"])
    with psycopg.connect(migrated_pg15_dsn) as conn:
        conn.execute(widen, (original,))
    error = refused(await op(crew, "alice", "memory.grants.grant", {
        **copy, "principal_id": "carol", "context_ids": ["c2"]}), 409, "row_unrecorded")
    assert error["details"]["id"] == original
    named = {(m["id"], m["problem"]) for m in (await deep(crew))["mismatches"]}
    assert named == {(original, "changed"), (to_bob, "changed")}, named
