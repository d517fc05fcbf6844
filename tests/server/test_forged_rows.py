"""Rows changed behind the server together with a matching forged record (issue 37 item 12)
on a real server and PostgreSQL with encryption at rest.

The database role alone (no master key) turns a sealed memory into plain forged text and
appends a ``memory.updated`` record that matches it. That record has no MAC, so it is no
record: the re-sealing worker refuses the row instead of sealing it (and appending a
valid-MAC ``memory.resealed`` over the forgery), an update is refused (409), and the deep
audit keeps naming the row.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
from hack.support.pgservers import APP_ROLE
from psycopg.rows import dict_row

from attested_cortex.attest import cbor
from attested_cortex.attest.records import memory_record
from attested_cortex.store.memories import COLUMNS, memory_from_row
from attested_cortex.store.migrating import migrate
from tests.server.test_keyed_chain import AGENT, app_dsn, deep, keyed
from tests.support.cortex import MakeCortex


async def test_the_resealer_does_not_launder_a_consistent_forgery(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    cortex = await keyed(make_cortex, migrated_pg15_dsn, tmp_path,
                         encryption={"at_rest": True})
    target = await cortex.store("kb", "the truth about the harbour")
    honest = await cortex.store("kb", "an honest neighbour")
    with psycopg.connect(app_dsn(cortex), row_factory=dict_row) as conn:
        conn.execute("UPDATE memories SET title = 'forged', content = 'a forged lie', "
                     "key_version = NULL, sealed = NULL, revision = revision + 1, "
                     "search = to_tsvector('simple', 'forged lie') WHERE id = %s",
                     (target["id"],))
        row = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = %s",
                           (target["id"],)).fetchone()
        assert row is not None
        conn.execute("INSERT INTO signed_events (agent_id, event_type, payload) "
                     "VALUES (%s, 'memory.updated', %s)",
                     (AGENT, cbor.encode(memory_record(memory_from_row(row)))))

    resealer = cortex.services.resealer
    assert resealer is not None
    await resealer.reseal_once()
    with psycopg.connect(migrated_pg15_dsn) as conn:
        found = conn.execute("SELECT key_version FROM memories WHERE id = %s",
                             (target["id"],)).fetchone()
    assert found == (None,)  # not sealed: the forgery is not signed into the chain
    assert resealer.memories_refused == {uuid.UUID(target["id"])}

    report = await deep(cortex)
    mismatches = {m["id"]: m["problem"] for m in report["deep"]["mismatches"]}
    assert mismatches == {target["id"]: "changed"}, report["deep"]
    assert honest["id"] not in mismatches

    # An update would extend the forgery into the chain as well: refused.
    reply = await cortex.call("PATCH", f"/v1/memories/{target['id']}", {"content": "x"})
    assert reply.status == 409, reply.text
    assert reply.body["error"]["code"] == "changed_behind_the_server"
    # The honest row is written to as ever.
    reply = await cortex.call("PATCH", f"/v1/memories/{honest['id']}", {"content": "y"})
    assert reply.status == 200, reply.text


async def test_blind_tokens_copied_between_memories_are_named(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """Issue 37 item 13: one sealed memory's search tokens copied onto another make recall
    return the other for the first one's words; the deep audit re-derives them and names
    the poisoned row (``changed``, ``search``)."""
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    cortex = await keyed(make_cortex, migrated_pg15_dsn, tmp_path,
                         encryption={"at_rest": True})
    source = await cortex.store("kb", "the lighthouse keeper rows at midnight")
    poisoned = await cortex.store("kb", "an unrelated note about invoices")
    assert (await deep(cortex))["deep"]["mismatch_count"] == 0
    with psycopg.connect(app_dsn(cortex)) as conn:
        conn.execute("UPDATE memories SET search = (SELECT search FROM memories WHERE id = %s)"
                     " WHERE id = %s", (source["id"], poisoned["id"]))
    found = (await cortex.call("POST", "/v1/recall", {"query": "lighthouse keeper"})).body
    assert poisoned["id"] in [r["id"] for r in found["results"]]  # the poisoning works
    report = (await deep(cortex))["deep"]
    named = [(m["id"], m["problem"], m["fields"]) for m in report["mismatches"]]
    assert named == [(poisoned["id"], "changed", ["search"])], report
