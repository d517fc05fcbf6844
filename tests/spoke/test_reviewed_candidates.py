"""Candidate review writes only what the capture recorded (issue 37 item 12's class,
ADR 0087): review signs a candidate's proposed content and scope into records with a good
MAC, so a proposal edited behind the server (the database role, without the master key) is
refused with 409 ``candidate_unrecorded``, also when a matching capture record was forged
beside it, and the deep audit names it; an untouched sibling is promoted as before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import psycopg
from hack.support.pgservers import APP_ROLE, SUPERUSER
from psycopg.rows import dict_row

from attested_cortex.attest import cbor
from attested_cortex.attest.spoke_records import candidate_record
from attested_cortex.store import events
from attested_cortex.store.migrating import migrate
from tests.server.test_keyed_chain import key_file
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.support.cortex import MakeCortex

SUBJECT = {"space_id": "kb", "subject_id": "u1"}


def edit_proposal(dsn: str, candidate_id: str, *, forge_record: bool) -> None:
    """As the database role: rewrite the proposal; with ``forge_record`` also append the
    capture record that matches the edited row (no key: no MAC)."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        conn.execute("UPDATE memory_candidates SET proposed = '{\"text\": \"a planted lie\"}'"
                     " WHERE candidate_id = %s", (candidate_id,))
        if forge_record:
            row = conn.execute("SELECT * FROM memory_candidates WHERE candidate_id = %s",
                               (candidate_id,)).fetchone()
            assert row is not None
            payload = {"op": "memory.capture", "space_id": "kb", "principal": "owner",
                       "rows": {"candidate": [candidate_record(row)]}}
            conn.execute("INSERT INTO signed_events (agent_id, event_type, payload) "
                         "VALUES (%s, 'spoke.memory.capture', %s)",
                         (row["captured_by"], cbor.encode(payload)))


async def test_an_edited_proposal_is_not_promoted_into_the_chain(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        master_key={"file": key_file(tmp_path)},
                        encryption={"at_rest": False})
    await ok(team, "owner", "memory.subjects.ensure", {**SUBJECT, "kind": "person:human"})
    edited, forged, honest = (await ok(team, "owner", "memory.capture", {
        **SUBJECT, "capture_scope": {"shared": True},
        "items": [{"text": "kept one"}, {"text": "kept two"}, {"text": "kept three"}]}))["refs"]
    app = migrated_pg15_dsn.replace(f"//{SUPERUSER}@", f"//{APP_ROLE}@")
    edit_proposal(app, edited, forge_record=False)
    edit_proposal(app, forged, forge_record=True)

    for candidate in (edited, forged):
        refused(await op(team, "owner", "memory.candidates.review", {
            "space_id": "kb", "candidate_id": candidate, "decision": "promote"}),
            409, "candidate_unrecorded")
    promoted = await ok(team, "owner", "memory.candidates.review", {
        "space_id": "kb", "candidate_id": honest, "decision": "promote"})
    listed = await ok(team, "owner", "memory.records.list", SUBJECT)
    assert [r["content"]["text"] for r in listed["records"]] == ["kept three"], listed
    assert listed["records"][0]["record_id"] == promoted["refs"][1]

    reply = await team.call("owner", "GET", "/v1/audit/verify?deep=true")
    named = {(m["kind"], m["id"], m["problem"], tuple(m["fields"]))
             for m in reply.body["deep"]["mismatches"]}
    assert {(c, "changed", ("proposed_sha256",)) for c in (edited, forged)} <= {
        (i, p, f) for k, i, p, f in named if k == "candidate"}, named

    # the lookup pages through the capturer's events (a pending candidate may be old)
    since = datetime(2000, 1, 1, tzinfo=UTC)
    async with await psycopg.AsyncConnection.connect(migrated_pg15_dsn,
                                                     row_factory=dict_row) as conn:
        paged = [p async for p in events.recorded_since(
            conn, agent_id="owner", event_type="spoke.memory.capture", since=since, batch=1)]
        whole = [p async for p in events.recorded_since(
            conn, agent_id="owner", event_type="spoke.memory.capture", since=since)]
    assert len(paged) == 2 and paged == whole  # the capture and the forgery (no seal here)
