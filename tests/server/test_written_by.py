"""A successful write's trust tier and effective scopes in its audit record (issue 27
section 1, ADR 0066, migration 0021) on a real server and PostgreSQL.

An Untrusted caller (its ceiling widened to let it write, as a MemoryCortex may) and a
Trusted one store memories, the Trusted one links them: each ``memory.stored`` and
``link.recorded`` record names the tier and exactly the effective scopes capabilities show
for that caller, and the deep audit is clean. Then the database role alone raises the
Untrusted row to Trusted and widens the Trusted row's scopes: the deep audit names both rows
and the field each changed.
"""

from __future__ import annotations

from typing import Any

import psycopg

from attested_cortex.attest.decoding import decode
from tests.support.cortex import CortexClient, MakeCortex

UNTRUSTED = {"X-Cortex-Trust-Tier": "Untrusted"}


async def effective(client: CortexClient, headers: dict[str, str]) -> tuple[str, list[str]]:
    reply = await client.call("GET", "/v1/capabilities", headers=headers)
    you = reply.body["trust"]["you"]
    return you["tier"], sorted(you["effective_scopes"])


def records(dsn: str) -> dict[str, dict[str, Any]]:
    """The latest record of each memory and link, by id."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT payload FROM signed_events WHERE event_type IN "
                            "('memory.stored', 'link.recorded') ORDER BY sequence").fetchall()
    found = {}
    for (payload,) in rows:
        record = decode(bytes(payload))
        assert isinstance(record, dict)
        found[str(record.get("memory_id") or record.get("link_id"))] = record
    return found


async def test_records_name_tier_and_effective_scopes_and_the_deep_audit_checks_them(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    dsn = migrated_pg15_dsn
    client = await make_cortex(dsn, migrated=False, graph_backend="CTE", trust={
        "ceilings": {"Untrusted": {"memory.write": "granted"}}})
    low = await client.call("POST", "/v1/memories", {"namespace": "t", "content": "low"},
                            headers=UNTRUSTED)
    assert low.status == 201, low.text
    high = await client.store("t", "high")
    link = await client.call("POST", "/v1/links", {"src_id": high["id"],
                                                   "dst_id": low.body["id"],
                                                   "relation": "related_to"})
    assert link.status == 201, link.text

    untrusted, trusted = await effective(client, UNTRUSTED), await effective(client, {})
    assert untrusted[0] == "Untrusted" and trusted[0] == "Trusted"
    assert set(untrusted[1]) < set(trusted[1])  # the ceiling took scopes away
    kept = records(dsn)
    for key, (tier, scopes) in ((low.body["id"], untrusted), (high["id"], trusted),
                                (link.body["id"], trusted)):
        assert (kept[key]["tier"], kept[key]["scopes"]) == (tier, scopes), kept[key]
    deep = (await client.call("GET", "/v1/audit/verify?deep=true")).body
    assert deep["ok"] and deep["deep"]["mismatch_count"] == 0, deep

    with psycopg.connect(dsn, autocommit=True) as conn:  # the database role, behind the server
        conn.execute("UPDATE memories SET written_tier = 'Trusted' WHERE id = %s",
                     (low.body["id"],))
        conn.execute("UPDATE memories SET written_scopes = written_scopes || "
                     "'{approvals.decide:**}' WHERE id = %s", (high["id"],))
    deep = (await client.call("GET", "/v1/audit/verify?deep=true")).body
    named = {(m["id"], tuple(m["fields"]), m["problem"]) for m in deep["deep"]["mismatches"]}
    assert named == {(low.body["id"], ("tier",), "changed"),
                     (high["id"], ("scopes",), "changed")}, deep
