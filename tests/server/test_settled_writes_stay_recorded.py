"""Writes completed through the settling transaction (an approved resubmission; ADR 0017)
leave records that the row checks before a later update or delete accept (ADR 0018), and the
deep audit stays clean: the two halves of issue 20 (a write's approval settled in its own
transaction; a write refused when its row no longer matches its record) agree on what a
record of a memory is."""

from __future__ import annotations

from pathlib import Path

from tests.server.test_approvals_api import BODY, decide, hold, server
from tests.support.cortex import MakeCortex


async def test_an_approved_store_can_be_updated_and_deleted_and_audits_clean(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    assert (await decide(client, approval)).status == 200
    stored = await client.call("POST", "/v1/memories", BODY,
                               headers={"X-Cortex-Approval": approval})
    assert stored.status == 201, stored.text
    memory = stored.body["id"]
    plain = await client.store("open/x", "an ordinary memory", tags=["t"])

    for target in (memory, plain["id"]):
        updated = await client.call("PATCH", f"/v1/memories/{target}",
                                    {"content": "changed once"})
        assert updated.status == 200, updated.text
    deleted = await client.call("DELETE", f"/v1/memories/{memory}")
    assert deleted.status == 200, deleted.text

    audit = await client.call("GET", "/v1/audit/verify?deep=true")
    assert audit.status == 200, audit.text
    assert audit.body["ok"] is True, audit.body
    assert audit.body["deep"]["mismatches"] == [], audit.body["deep"]
