"""Spoke-memory events through subscriptions (issue 41, ADR 0130): every committed write of
the family is a ``post_spoke_write`` event in the hook's payload shape (op, space,
principal, request, receipt), keyed by the space and in commit order; a refused (rolled back)
op is none; a subscription filters them by event name and namespace (the space). A real
receiver verifies each delivery with the Standard Webhooks library. About 2 s."""

from __future__ import annotations

from pathlib import Path

from hack.support.waiting import await_until

from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok, op, refused
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST
from tests.support.cortex import MakeCortex


async def test_spoke_writes_are_delivered_and_a_rolled_back_one_is_not(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path,
                        {"owner": OWNER, "admin": "subscriptions.manage"},
                        subscriptions=FAST)
    async with receiving() as receiver:
        made = await team.call("admin", "POST", "/v1/subscriptions", {
            "name": "spoke", "url": receiver.url, "events": ["post_spoke_write"],
            "namespaces": ["kb"], "allow_private_targets": True})
        assert made.status == 201, made.text
        receiver.secret = made.body["secret"]
        await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb",
                                                          "subject_id": "u1"})
        created = await ok(team, "owner", "memory.records.create", {
            "space_id": "kb", "subject_id": "u1", "content": {"text": "likes tea"},
            "placement": {"context_id": "c1"}})
        record = created["refs"][0]
        stale = await op(team, "owner", "memory.records.update", {
            "space_id": "kb", "record_id": record, "expected_revision": 7,
            "content": {"text": "never stored"}})
        refused(stale, 409, "revision_conflict")  # rolled back: no event
        await ok(team, "owner", "memory.subjects.ensure", {"space_id": "elsewhere",
                                                          "subject_id": "u1"})
        await team.store("owner", "kb", "a native write: post_store, not subscribed")
        last = await ok(team, "owner", "memory.records.delete", {
            "space_id": "kb", "record_id": record, "expected_revision": 1})
        # in order per space: the last write's arrival means every earlier one arrived
        await await_until(lambda: any(d["body"]["data"]["receipt"]["receipt_id"] ==
                                      last["receipt_id"] for d in receiver.accepted),
                          seconds=10, what="the last spoke write delivered")
    assert receiver.refused_signatures == 0
    bodies = [d["body"] for d in receiver.accepted]
    assert [b["data"]["op"] for b in bodies] == [
        "memory.subjects.ensure", "memory.records.create", "memory.records.delete"]
    assert {b["type"] for b in bodies} == {"post_spoke_write"}
    assert {b["key"] for b in bodies} == {"space:kb"}
    assert [b["sequence"] for b in bodies] == sorted(b["sequence"] for b in bodies)
    created_event = bodies[1]["data"]
    assert created_event["space_id"] == "kb" and created_event["principal"] == "owner"
    assert created_event["request"]["content"] == {"text": "likes tea"}
    assert created_event["receipt"] == created  # the receipt the caller was answered
    assert "never stored" not in str(bodies)
