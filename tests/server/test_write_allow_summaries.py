"""A write's Allow summary in its own record (issue 40, "Allow decisions of rules summarized
per request in the request's event"; ADR 0124, migration 0040) on a real server and
PostgreSQL.

A store, an update, a delete and a link allowed by a named PermissionRule name that rule in their
``memory.*`` / ``link.*`` records; a store no rule decides names the default. The row keeps
the same list, so ``cortexctl audit verify --deep`` passes; the database role alone then
rewrites one row's list (to claim the default) and the deep audit names that row and field.
A row an older build wrote (no summary in row or record) still verifies, and its next
write records one. Before ADR 0124 write records carried no summary at all.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path
from typing import Any

import psycopg
from hack.support.served import CORTEXCTL
from psycopg.rows import dict_row

from attested_cortex.attest import cbor
from attested_cortex.attest.decoding import decode
from attested_cortex.attest.records import memory_record
from attested_cortex.store.memories import memory_from_row
from attested_cortex.store.migrating import migrate
from tests.server.test_approvals_api import BODY, decide, hold
from tests.server.test_permissions_api import deny_rule
from tests.server.test_pipeline import HELD, approval_settings
from tests.support.cortex import MakeCortex

RULE = {"source": "team/kb-writers", "namespace": "kb/**", "agents": ["dev:tester"],
        "operations": ["store", "update", "delete", "link"], "decision": "allow",
        "reason": "the team writes its knowledge base"}
BY_RULE = ["allow:rule:team/kb-writers"]


def latest_records(dsn: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest record of each memory and link, by (event type, id)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT event_type, payload FROM signed_events WHERE event_type "
                            "LIKE 'memory.%' OR event_type LIKE 'link.%' ORDER BY sequence"
                            ).fetchall()
    found = {}
    for event_type, payload in rows:
        record = decode(bytes(payload))
        assert isinstance(record, dict)
        found[(event_type, str(record.get("memory_id") or record.get("link_id")))] = record
    return found


async def deep_cli(dsn: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", dsn, "--deep"],
        capture_output=True, text=True, timeout=120, check=False)


async def test_writes_name_the_rule_or_the_default_that_allowed_them(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    dsn = migrated_pg15_dsn
    client = await make_cortex(dsn, migrated=False, graph_backend="CTE",
                               permissions={"mode": "enforce", "rules": [RULE]})
    ruled = await client.store("kb/team", "a fact the team keeps")
    other = await client.store("kb/team", "another fact")
    free = await client.store("scratch", "a note no rule speaks of")
    updated = await client.call("PATCH", f"/v1/memories/{ruled['id']}",
                                {"content": "a fact the team keeps, revised"})
    assert updated.status == 200, updated.text
    link = await client.call("POST", "/v1/links", {"src_id": ruled["id"],
                                                   "dst_id": other["id"],
                                                   "relation": "related_to"})
    assert link.status == 201, link.text
    gone = await client.store("kb/team", "a fact to forget")
    deleted = await client.call("DELETE", f"/v1/memories/{gone['id']}")
    assert deleted.status in (200, 204), deleted.text

    kept = latest_records(dsn)
    assert kept[("memory.stored", other["id"])]["allowed"] == BY_RULE
    assert kept[("memory.updated", ruled["id"])]["allowed"] == BY_RULE
    assert kept[("link.recorded", link.body["id"])]["allowed"] == BY_RULE
    assert kept[("memory.deleted", gone["id"])]["allowed"] == BY_RULE
    assert kept[("memory.stored", free["id"])]["allowed"] == ["allow:default"]
    for record in kept.values():  # names only: no text of the memory reaches the summary
        assert all("fact" not in entry for entry in record.get("allowed", []))
    verified = await deep_cli(dsn)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    with psycopg.connect(dsn, autocommit=True) as conn:  # the database role, behind the server
        conn.execute("UPDATE memories SET written_allowed = '{allow:default}' WHERE id = %s",
                     (other["id"],))
    deep = (await client.call("GET", "/v1/audit/verify?deep=true")).body
    named = {(m["id"], tuple(m["fields"]), m["problem"]) for m in deep["deep"]["mismatches"]}
    assert named == {(other["id"], ("allowed",), "changed")}, deep
    refused = await deep_cli(dsn)
    assert refused.returncode == 1 and other["id"] in refused.stdout, refused.stdout


async def test_rows_written_before_0040_verify_and_take_a_summary_when_written_again(
        make_cortex: MakeCortex, pg15_dsn: str) -> None:
    """A memory an older build wrote (schema 0039: its row and record have no Allow
    summary) verifies after the upgrade; updating it matches its old record and records the
    update's summary."""
    await migrate(pg15_dsn, target=39, graph=False)
    with psycopg.connect(pg15_dsn, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute(
            "INSERT INTO memories (id, namespace, content, author, written_tier, "
            "written_scopes) VALUES (%s, 'kb/team', 'an old fact', 'dev:tester', 'Trusted', "
            "'{memory.write:**}') RETURNING *", (uuid.uuid4(),)).fetchone()
        assert row is not None and "written_allowed" not in row
        record = memory_record(memory_from_row(row))
        assert "allowed" not in record and record["tier"] == "Trusted"
        conn.execute("INSERT INTO signed_events (agent_id, event_type, payload) "
                     "VALUES ('dev:tester', 'memory.stored', %s)", (cbor.encode(record),))
    old = str(row["id"])
    client = await make_cortex(pg15_dsn, graph_backend="CTE",
                               permissions={"mode": "enforce", "rules": [RULE]})
    verified = await deep_cli(pg15_dsn)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    updated = await client.call("PATCH", f"/v1/memories/{old}", {"content": "revised"})
    assert updated.status == 200, updated.text
    assert latest_records(pg15_dsn)[("memory.updated", old)]["allowed"] == BY_RULE
    verified = await deep_cli(pg15_dsn)
    assert verified.returncode == 0, verified.stdout + verified.stderr


async def test_an_advisory_would_be_denial_is_named_in_the_writes_record(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    """In advisory mode a rule's Deny lets the write through: its record says which rule
    would have refused it, not that the default allowed it."""
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               permissions={"mode": "advisory", "rules": [deny_rule()]})
    stored = await client.store("secret/k", "kept despite the rule")
    record = latest_records(migrated_pg15_dsn)[("memory.stored", stored["id"])]
    assert record["allowed"] == ["deny:rule:prod/no-secrets"], record


async def test_an_approved_write_names_the_rule_that_held_it(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """An AskUser hold, approved and completed: the write's record names the rule whose
    hold a human lifted (the approval itself is a ``policy.*`` statement)."""
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               **approval_settings(tmp_path))
    approval = await hold(client)
    assert (await decide(client, approval)).status == 200
    done = await client.call("POST", "/v1/memories", BODY,
                             headers={"X-Cortex-Approval": approval})
    assert done.status == 201, done.text
    record = latest_records(migrated_pg15_dsn)[("memory.stored", done.body["id"])]
    assert record["allowed"] == [f"ask_user:rule:{HELD['source']}"], record
