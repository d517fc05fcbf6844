"""Transcript writes in the audit chain, on a real server and database: every store, archive
and prune appends its write record; the deep audit (HTTP and ``cortexctl audit verify
--deep``) names by id a transcript whose frame or metadata was changed, or whose frame was
dropped, behind the server, and accepts a frame the sweeper pruned."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import zstandard
from hack.support.pgservers import APP_ROLE, SUPERUSER
from hack.support.served import CORTEXCTL
from hack.support.waiting import await_until

from attested_cortex.attest.decoding import decode
from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.service.pipeline.write_records import SWEEPER_AGENT
from attested_cortex.store.events import CHAIN_LOCK_KEY
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import row, store_transcript

POLICY = {"enabled": True, "retention_days": 30, "prune_after_days": 7,
          "sweep_interval_seconds": 86400,  # the test drives every sweep itself
          "namespaces": [{"namespace": "scratch/**", "retention_days": 1},
                         {"namespace": "support/**"}]}


@pytest.fixture
async def client(make_cortex: MakeCortex, migrated_pg15_dsn: str) -> CortexClient:
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)  # grants what the server role holds
    return await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY)


def as_app_role(client: CortexClient, statement: str, *params: Any) -> None:
    """Change a row as the role the server uses in production (no superuser)."""
    dsn = client.dsn.replace(f"//{SUPERUSER}@", f"//{APP_ROLE}@")
    with psycopg.connect(dsn) as conn:
        conn.execute(statement, params)


def records(dsn: str, transcript_id: str) -> list[tuple[str, str, dict[str, Any], bool]]:
    """(event type, agent, payload, signed) of every record of one transcript, in order."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT event_type, agent_id, payload, signature IS NOT NULL "
                             "FROM signed_events WHERE event_type LIKE 'transcript.%%' "
                             "ORDER BY sequence").fetchall()
    trail = []
    for kind, agent, payload, signed in found:
        record = decode(bytes(payload))
        assert isinstance(record, dict)
        if record["transcript_id"] == transcript_id:
            trail.append((kind, agent, dict(record), signed))
    return trail


async def deep(client: CortexClient) -> dict[str, Any]:
    reply = await client.call("GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200, reply.text
    return dict(reply.body)


def problems(report: dict[str, Any]) -> dict[str, tuple[str, str, list[str]]]:
    return {m["id"]: (m["kind"], m["problem"], m["fields"])
            for m in report["deep"]["mismatches"]}


async def sweep_at(client: CortexClient, days: float, since: Any) -> Any:
    client.services.transcripts.clock = lambda: since + timedelta(days=days)
    return await client.services.transcripts.sweep()


async def test_store_archive_and_prune_are_recorded_and_sweep_clean(
    client: CortexClient,
) -> None:
    kept = await store_transcript(client, "support/acme", metadata={"n": 1.5, "b": [True]})
    brief = await store_transcript(client, "scratch/tmp")
    (created,) = row(client.dsn, "SELECT created_at FROM transcripts WHERE id = %s",
                     brief["id"])
    report = await deep(client)
    assert report["ok"] and report["deep"]["transcripts"] == 2, report
    assert (await sweep_at(client, 2, created)).archived == 1
    assert (await sweep_at(client, 10, created)).pruned == 1
    (frame,) = row(client.dsn, "SELECT frame FROM transcripts WHERE id = %s", brief["id"])
    assert frame is None
    report = await deep(client)  # a pruned frame is a recorded state, not a mismatch
    assert report["ok"] and report["deep"]["mismatch_count"] == 0, report
    assert report["deep"]["transcripts"] == 2 and report["deep"]["records"] == 4
    trail = records(client.dsn, brief["id"])
    assert [(kind, agent) for kind, agent, _, _ in trail] == [
        ("transcript.stored", "dev:tester"), ("transcript.archived", SWEEPER_AGENT),
        ("transcript.pruned", SWEEPER_AGENT)]
    stored, archived, pruned = (payload for _, _, payload, _ in trail)
    assert stored["frame_sha256"] is not None and stored["archived_at"] is None
    assert archived["frame_sha256"] == stored["frame_sha256"] and archived["archived_at"]
    assert pruned["frame_sha256"] is None and pruned["pruned_at"] is not None
    assert [kind for kind, _, _, _ in records(client.dsn, kept["id"])] == ["transcript.stored"]


async def test_frame_metadata_and_a_frame_dropped_behind_the_server_are_named(
    client: CortexClient,
) -> None:
    reframed = await store_transcript(client)
    relabelled = await store_transcript(client, metadata={"channel": "chat"})
    dropped = await store_transcript(client)
    untouched = await store_transcript(client)
    other = zstandard.ZstdCompressor(level=3).compress(b"user: nothing happened\n")
    as_app_role(client, "UPDATE transcripts SET frame = %s WHERE id = %s", other,
                reframed["id"])
    as_app_role(client, "UPDATE transcripts SET metadata = '{\"channel\": \"email\"}' "
                "WHERE id = %s", relabelled["id"])
    as_app_role(client, "UPDATE transcripts SET frame = NULL, archived_at = now(), "
                "pruned_at = now() WHERE id = %s", dropped["id"])
    report = await deep(client)
    assert report["ok"] is False and report["events"] > 0  # the chain itself is intact
    found = problems(report)
    assert found == {
        reframed["id"]: ("transcript", "changed", ["frame_sha256"]),
        relabelled["id"]: ("transcript", "changed", ["metadata_sha256"]),
        dropped["id"]: ("transcript", "changed", ["archived_at", "frame_sha256", "pruned_at"]),
    }
    assert untouched["id"] not in found


async def test_rows_written_or_removed_behind_the_server_are_named_by_the_cli(
    client: CortexClient,
) -> None:
    gone = await store_transcript(client)
    smuggled = str(uuid.uuid4())
    frame = zstandard.ZstdCompressor(level=3).compress(b"x")
    with psycopg.connect(client.dsn) as conn:  # only an owner can remove a row
        conn.execute("INSERT INTO transcripts (id, namespace, owner, frame, raw_bytes, "
                     "raw_chars, stored_bytes) VALUES (%s, 'support/acme', 'dev:tester', %s, "
                     "1, 1, %s)", (smuggled, frame, len(frame)))
        conn.execute("DELETE FROM transcripts WHERE id = %s", (gone["id"],))
    result = await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", client.dsn, "--deep"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result
    assert f"transcript {smuggled}: missing_event" in result.stdout
    assert f"transcript {gone['id']}: missing_row" in result.stdout
    assert "1 transcripts" in result.stdout


async def test_records_are_signed_by_the_owner_and_the_audit_signer(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId("dev:tester")))
    write_identity(keys / "auditor", generate_key(AgentId("cortex:auditor")))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               keys_dir=keys, audit_signer="cortex:auditor")
    brief = await store_transcript(client, "scratch/tmp")
    (created,) = row(client.dsn, "SELECT created_at FROM transcripts WHERE id = %s",
                     brief["id"])
    await sweep_at(client, 2, created)
    await sweep_at(client, 10, created)
    trail = records(client.dsn, brief["id"])
    assert [(agent, signed) for _, agent, _, signed in trail] == [
        ("dev:tester", True), ("cortex:auditor", True), ("cortex:auditor", True)]
    report = await deep(client)
    assert report["ok"] and report["signatures_checked"] >= 3, report


async def test_a_citing_store_waits_for_a_sweep_batch_instead_of_deadlocking(
    client: CortexClient,
) -> None:
    cited = await store_transcript(client)
    # Play a sweep batch: lock the transcript's row (its UPDATE), then the chain (its records).
    async with await psycopg.AsyncConnection.connect(client.dsn) as sweeper:
        await sweeper.execute("SELECT id FROM transcripts WHERE id = %s FOR UPDATE",
                              (cited["id"],))
        store = asyncio.create_task(client.call("POST", "/v1/memories", {
            "namespace": "support/acme", "content": "why staging failed",
            "citations": [{"transcript_id": cited["id"], "start": 0, "end": 20}]}))

        async def store_waits() -> bool:  # on the row lock
            assert not store.done(), "the store never waited"
            return await _blocked_by(sweeper)

        await await_until(store_waits, what="the store to wait on the row lock", seconds=10,
                          interval_s=0.02)
        # A store holding the chain lock while it waits would deadlock here (or time out).
        await sweeper.execute("SET lock_timeout = '5s'")
        await sweeper.execute("SELECT pg_advisory_xact_lock(%s)", (CHAIN_LOCK_KEY,))
        await sweeper.commit()
        reply = await store
    assert reply.status == 201, reply.text


async def _blocked_by(conn: psycopg.AsyncConnection[Any]) -> bool:
    async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as probe:
        cur = await probe.execute("SELECT count(*) FROM pg_stat_activity "
                                  "WHERE %s = ANY(pg_blocking_pids(pid))",
                                  (conn.info.backend_pid,))
        found = await cur.fetchone()
    return found is not None and found[0] > 0


async def test_deep_audit_of_a_database_before_transcripts(pg15_dsn: str) -> None:
    await migrate(pg15_dsn, target=7)
    result = await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", pg15_dsn, "--deep"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result
    assert "0 transcripts" in result.stdout
