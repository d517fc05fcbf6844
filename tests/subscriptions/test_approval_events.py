"""Approval events through subscriptions (issue 41, seed 000 K4): a held operation is a
``pre_approval`` event (what a notifier tells a human), its decision a ``post_approval``,
in that order for the approval, committed with the hold and the decision. About 2 s."""

from __future__ import annotations

import json
from pathlib import Path

from hack.support.waiting import await_until

from tests.server.test_pipeline import approval_settings, signed
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST, subscribe
from tests.support.cortex import MakeCortex


async def test_held_and_decided_approvals_are_delivered_in_order(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               **{**approval_settings(tmp_path), "subscriptions": FAST})
    async with receiving() as receiver:
        await subscribe(cortex, receiver, events=["pre_approval", "post_approval"])
        held = await cortex.call("POST", "/v1/memories", {"namespace": "held/x",
                                                          "content": "needs a yes"})
        assert held.status == 202, held.text
        approval = held.body["error"]["details"]["approval_id"]
        decide = json.dumps({"decision": "approve"}).encode()
        path = f"/v1/approvals/{approval}"
        decided = await cortex.call("POST", path, raw=decide,
                                    headers=signed("POST", path, decide))
        assert decided.status == 200, decided.text
        await await_until(lambda: len(receiver.accepted) == 2, seconds=10,
                          what="the held and the decided events")
    first, second = (d["body"] for d in receiver.accepted)
    assert first["type"] == "pre_approval" and second["type"] == "post_approval"
    assert first["key"] == second["key"] == f"approval:{approval}"
    assert first["data"]["operation"] == "memory.store"
    assert second["data"]["decision"] == "approved" and second["sequence"] > first["sequence"]
