"""The HMAC-keyed audit chain (issue 27 part 4, ADR 0051) on a real server and PostgreSQL.

The forgery: with the database role alone, change a memory row and append a write record
that matches it. The hash chain holds (the trigger hashes whatever is appended) and the deep
audit without the master key answers ok: that was threat-model gap 7, and is still what a
verification without the key says. With the key, the forged record is named (no MAC, then a
MAC the key does not give) and the row is compared with its latest sealed record instead.

Every append path seals: one-statement and transactional stores, the batch route, updates,
deletes, links, invalidations, transcripts and both sweeps, policy records; and two servers
(two pools, as two replicas) appending at once keep one keyed chain.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE, SUPERUSER
from psycopg.rows import dict_row

from attested_cortex.attest import cbor
from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.records import memory_record
from attested_cortex.cli import audit as audit_cli
from attested_cortex.store.memories import COLUMNS, memory_from_row
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import store_transcript

AGENT = "dev:tester"


def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "master.key"
    if not path.exists():
        path.write_bytes(mk.generate_key())
    return path


async def keyed(make_cortex: MakeCortex, dsn: str, tmp_path: Path, **settings: Any
                ) -> CortexClient:
    # A storage cap: a store with nothing else to write is then the one-statement store.
    # Rows plain (a new cortex with a key would seal them, ADR 0079): the forgeries below
    # edit a row's text in place, and the chain, not sealing, is what these tests are about.
    settings.setdefault("encryption", {"at_rest": False})
    return await make_cortex(dsn, migrated=False, graph_backend="CTE",
                             master_key={"file": key_file(tmp_path)},
                             quotas={"enabled": False, "storage_per_agent_bytes": 10**9},
                             **settings)


async def deep(client: CortexClient) -> dict[str, Any]:
    reply = await client.call("GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200, reply.text
    return dict(reply.body)


def app_dsn(client: CortexClient) -> str:
    return client.dsn.replace(f"//{SUPERUSER}@", f"//{APP_ROLE}@")


async def test_a_forged_record_is_named_only_with_the_key(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    cortex = await keyed(make_cortex, migrated_pg15_dsn, tmp_path)
    target, other = await cortex.store("kb", "the truth"), await cortex.store("kb", "other")
    # The database role alone: change the row, then append the record that matches it.
    with psycopg.connect(app_dsn(cortex), row_factory=dict_row) as conn:
        conn.execute("UPDATE memories SET content = 'a lie', revision = revision + 1 "
                     "WHERE id = %s", (target["id"],))
        row = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = %s",
                           (target["id"],)).fetchone()
        assert row is not None
        forged_record = cbor.encode(memory_record(memory_from_row(row)))
        forged = conn.execute(
            "INSERT INTO signed_events (agent_id, event_type, payload) "
            "VALUES (%s, 'memory.updated', %s) RETURNING sequence",
            (AGENT, forged_record)).fetchone()
    assert forged is not None
    sequence = forged["sequence"]

    # Without the key: what every verification said before the keyed chain (the gap).
    unkeyed, swept, _ = await audit_cli._verify(migrated_pg15_dsn, None, None, wait_seconds=5,
                                             deep=True)
    assert unkeyed.ok and swept is not None and swept["ok"], (unkeyed, swept)
    assert unkeyed.keyed["checked"] is False and "no master key" in unkeyed.keyed["reason"]

    # With the key (the server's own): the forged record and the row it covers are named.
    report = await deep(cortex)
    assert report["ok"] is False
    assert (report["first_bad_sequence"], report["reason"]) == (sequence, "unkeyed_event")
    chain = report["keyed"]
    assert chain["faults"] == [{"sequence": sequence, "problem": "unkeyed_event"}]
    assert (chain["keyed_from"], chain["macs_checked"]) == (1, sequence - 1)
    mismatches = {m["id"]: (m["problem"], m["fields"]) for m in report["deep"]["mismatches"]}
    assert mismatches == {target["id"]: ("changed", ["content_sha256", "revision"])}
    assert other["id"] not in mismatches

    # A MAC row forged for it is no better: the key does not give it.
    with psycopg.connect(app_dsn(cortex)) as conn:
        conn.execute("INSERT INTO signed_event_macs (sequence, key_version, mac) "
                     "VALUES (%s, 1, %s)", (sequence, secrets.token_bytes(32)))
    offline, swept, _ = await audit_cli._verify(migrated_pg15_dsn, None,
                                             mk.load_key_file(key_file(tmp_path)),
                                             wait_seconds=5, deep=True)
    assert offline.keyed["faults"] == [{"sequence": sequence, "problem": "bad_mac"}]
    assert swept is not None and swept["mismatch_count"] == 1
    # The server's later appends chain on and verify (the fault stays the only one).
    await cortex.store("kb", "after")
    again = (await deep(cortex))["keyed"]
    assert again["fault_count"] == 1 and again["macs_checked"] == sequence


async def test_every_append_path_seals_and_two_servers_share_one_chain(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId(AGENT)))  # Cortex custody: signed
    write_identity(keys / "policy", generate_key(AgentId("cortex:policy")))
    rule = {"source": "prod/no-secrets", "namespace": "secret/**", "agents": ["*"],
            "operations": ["store"], "decision": "deny", "reason": "vault"}
    transcripts = {"enabled": True, "retention_days": 30, "prune_after_days": 7,
                   "sweep_interval_seconds": 86400}
    cortex = await keyed(make_cortex, migrated_pg15_dsn, tmp_path, keys_dir=keys,
                         audit_signer="cortex:policy", transcripts=transcripts,
                         permissions={"mode": "advisory", "rules": [rule]})
    one = await cortex.store("kb", "one statement")
    two = await cortex.call("POST", "/v1/memories", {"namespace": "kb", "content": "keyed"},
                            headers={"Idempotency-Key": str(uuid.uuid4())})  # transactional
    assert two.status == 201, two.text
    batch = await cortex.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "kb", "content": c} for c in ("a", "b", "c")]})
    assert batch.status == 201, batch.text
    await cortex.store("secret/x", "advisory: stored, and a policy record")
    assert (await cortex.call("PATCH", f"/v1/memories/{one['id']}",
                              {"content": "edited"})).status == 200
    made = await cortex.call("POST", "/v1/links", {"src_id": one["id"],
                                                   "dst_id": two.body["id"],
                                                   "relation": "related_to"})
    assert made.status == 201, made.text
    assert (await cortex.call("POST", "/v1/kg/invalidate",
                              {"link_id": made.body["id"]})).status == 200
    assert (await cortex.call("DELETE", f"/v1/memories/{two.body['id']}")).status == 200
    await store_transcript(cortex, "scratch/tmp")
    sweeper = cortex.services.transcripts
    start = sweeper.clock()
    sweeper.clock = lambda: start + timedelta(days=40)
    assert (await sweeper.sweep()).archived == 1  # the sweeps: pipelined appends
    sweeper.clock = lambda: start + timedelta(days=50)
    assert (await sweeper.sweep()).pruned == 1

    # A second server on the same database and key (another replica), writing at once.
    replica = await keyed(make_cortex, migrated_pg15_dsn, tmp_path)
    await asyncio.gather(*(c.store("kb", f"race {i}") for i in range(12)
                           for c in (cortex, replica)))

    report = await deep(replica)
    assert report["ok"], report
    caps = (await replica.call("GET", "/v1/capabilities")).body["attestation"]
    assert caps["keyed_chain"] == {"enabled": True, "key_version": 1, "mac": "HMAC-SHA256"}
    keyed_part = report["keyed"]
    assert keyed_part["keyed_from"] == 1 and keyed_part["fault_count"] == 0
    assert keyed_part["macs_checked"] == report["events"]
    with psycopg.connect(migrated_pg15_dsn) as conn:
        kinds = {k for (k,) in conn.execute("SELECT DISTINCT event_type FROM signed_events")}
    assert {"memory.stored", "memory.updated", "memory.deleted", "link.recorded",
            "link.invalidated", "transcript.stored", "transcript.archived",
            "transcript.pruned", "policy.advisory"} <= kinds, kinds


@pytest.mark.parametrize("flag", ["--master-key-file", "--master-key-dir"])
def test_the_cli_takes_the_key_as_a_file_or_the_mounted_ring(flag: str, tmp_path: Path
                                                             ) -> None:
    material = mk.generate_key()
    if flag == "--master-key-file":
        where = tmp_path / "key"
        where.write_bytes(material)
    else:
        where = tmp_path / "ring"
        where.mkdir()
        for name, text in mk.ring_files({1: material}, 1).items():
            (where / name).write_text(text)
    ring = audit_cli._load_master(where if flag.endswith("file") else None,
                                  where if flag.endswith("dir") else None)
    assert ring.subkey("audit") == mk.derive_subkey(material, "audit")


async def test_a_sealed_one_statement_store_past_the_cap_is_413_and_leaves_no_trace(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """The pipelined transaction of the sealed store: its refusal rolls everything back and
    the next store is sealed from the start."""
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               master_key={"file": key_file(tmp_path)},
                               quotas={"enabled": False, "storage_per_agent_bytes": 200})
    refused = await cortex.call("POST", "/v1/memories", {"namespace": "kb",
                                                         "content": "x" * 500})
    assert refused.status == 413, refused.text
    await cortex.store("kb", "small")
    report = await deep(cortex)
    assert report["ok"] and report["events"] == 1 and report["keyed"]["macs_checked"] == 1
