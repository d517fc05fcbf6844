"""A cortex bundle carries everything the cortex holds, or says what it did not (issue 37
item 11, ADR 0085): the spoke-memory family's tables travel with the memories; every table
and column of the schema is carried or named with its reason; a bundle of a database holding
more than this build knows lists it, the import says it is not complete, and the deep audit
(the restore verification Job's command, either restore path) does not verify the target."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE
from hack.support.served import CORTEXCTL

from attested_cortex.bundles import DirectorySink, export_bundle, import_bundle
from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import NOT_CARRIED, TABLES, omissions
from attested_cortex.service.resources.spoke import audit as spoke_audit
from attested_cortex.store.dumping import owner_connection, stored_columns
from attested_cortex.store.migrating import migrate
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER
from tests.support.cortex import MakeCortex

FLAGS = {"X-Spoke-Capabilities":
         "spoke-memory, spoke-memory-reflection, spoke-memory-transfer"}
SPOKE = [t.name for t in TABLES if t.name.startswith("memory_") and t.name not in (
    "memory_signatures", "memory_transcript_links")]


async def spoke(client: Agents, name: str, request: dict[str, Any]) -> Any:
    reply = await client.call("owner", "POST", "/v1/spoke/memory",
                              {"op": name, "request": request}, **FLAGS)
    assert reply.status == 200, reply.text
    return reply.body


async def served(make_cortex: MakeCortex, dsn: str, keys: Path, tmp_path: Path) -> Agents:
    """A server of ``dsn`` where ``owner`` is the authority of every space."""
    await migrate(dsn, app_role=APP_ROLE)
    return await agents(make_cortex, dsn, tmp_path, {"owner": OWNER}, keys_dir=keys,
                        embedder="none")


async def with_spoke_rows(client: Agents) -> None:
    """Every spoke table holds rows: spaces, subjects, a grant, records, profiles,
    candidates, receipts, an export and a staged import."""
    kb = {"space_id": "kb"}
    for subject in ("u1", "u2"):
        await spoke(client, "memory.subjects.ensure", {**kb, "subject_id": subject})
    await spoke(client, "memory.grants.grant", {**kb, "principal_id": "dev:agent-b",
                                                "capabilities": ["records_read"],
                                                "context_ids": ["c1"]})
    for n, placement in enumerate([{"context_id": "c1"}, {"shared": True}] * 3):
        await spoke(client, "memory.records.create", {
            **kb, "subject_id": f"u{n % 2 + 1}", "kind": "note:fact",
            "content": {"text": f"record {n}", "structured": {"n": n}},
            "placement": placement})
    await spoke(client, "memory.profile.update", {**kb, "subject_id": "u1", "kind": "style",
                                                  "text": "terse"})
    await spoke(client, "memory.profile.update", {**kb, "subject_id": "u1",
                                                  "kind": "personality", "text": "Calm."})
    await spoke(client, "memory.reflections.generate", {**kb, "subject_id": "u1"})
    await spoke(client, "memory.capture", {**kb, "subject_id": "u2",
                                           "capture_scope": {"shared": True},
                                           "items": [{"text": "a"}, {"text": "b"}]})
    made = await spoke(client, "memory.exports.create", {**kb, "chunk_bytes": 1024})
    chunk = await spoke(client, "memory.exports.get", {**kb, "export_id": made["refs"][0],
                                                       "ordinal": 0})
    await spoke(client, "memory.imports.stage", {
        "space_id": "kb2", "import_id": "00000000-0000-4000-8000-000000000011",
        "ordinal": 0, "final": False, "data": chunk["data"], "digest": chunk["digest"]})


async def cortexctl(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [*CORTEXCTL, *args], capture_output=True,
                                   text=True, timeout=120, check=False)


def counts(dsn: str, tables: list[str]) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
                for t in tables}


async def exported(dsn: str, out: Path) -> Any:
    async with owner_connection(dsn) as conn:
        return await export_bundle(conn, DirectorySink(out), keyring=_empty())


def _empty() -> Any:
    from attested_cortex.attest.keyring import EMPTY_KEYRING

    return EMPTY_KEYRING


async def test_every_table_is_carried_or_said_why(new_target: Callable[[], str]) -> None:
    """A migration that adds a table or a column must add it to bundles/formats.py or say
    why it is not carried: a freshly migrated cortex omits nothing."""
    async with owner_connection(new_target()) as conn:
        found = await stored_columns(conn)
    assert omissions(found) == {}
    # (memory_embeddings exists only where pgvector does)
    assert {t.name for t in TABLES} <= set(found) <= {t.name for t in TABLES} | set(NOT_CARRIED)


async def test_a_bundle_carries_the_spoke_memory_family(
    make_cortex: MakeCortex, new_target: Callable[[], str], keys: Path, tmp_path: Path,
) -> None:
    """Issue 37 item 11: 18 spaces, 11 grants, 78 records, 7 profiles and 502 candidates
    restored as 0 of each while import and the deep audit reported success."""
    source_dsn = new_target()
    source = await served(make_cortex, source_dsn, keys, tmp_path)
    await with_spoke_rows(source)
    before = counts(source_dsn, SPOKE)
    # every table but the pending worker's queue (empty once its jobs are done)
    assert all(n for t, n in before.items() if t != "memory_pending_work"), before
    report = await exported(source_dsn, tmp_path / "bundle")
    assert report.complete and all(report.rows[t] == before[t] for t in SPOKE)
    # the server's export (its own role) carries them as well: the manifest's rows
    streamed = await source.call("owner", "GET", "/v1/export")
    assert streamed.status == 200, streamed.text
    assert all(f'"{t}": {n}' in streamed.text for t, n in before.items()), streamed.text[-3000:]
    target = new_target()
    imported = await import_bundle(target, tmp_path / "bundle")
    assert imported.complete
    assert counts(target, SPOKE) == before
    index = "SELECT kind, key, sequence FROM spoke_row_records ORDER BY kind, key"
    with psycopg.connect(source_dsn) as src, psycopg.connect(target) as dst:
        # derived, not carried: the import rebuilds the index of latest op records
        assert dst.execute(index).fetchall() == src.execute(index).fetchall() != []
    restored = await served(make_cortex, target, keys, tmp_path)
    for name, request in [("memory.records.list", {"space_id": "kb"}),
                          ("memory.profile.get", {"space_id": "kb", "subject_id": "u1"}),
                          ("memory.candidates.list", {"space_id": "kb"}),
                          ("memory.grants.list", {"space_id": "kb", "view": "admin"})]:
        assert await spoke(restored, name, request) == await spoke(source, name, request)


async def test_a_bundle_that_does_not_carry_everything_says_so_and_never_verifies(
    make_cortex: MakeCortex, new_target: Callable[[], str], keys: Path, tmp_path: Path,
) -> None:
    source = new_target()
    with psycopg.connect(source, autocommit=True) as conn:
        conn.execute("CREATE TABLE newer_things (id integer PRIMARY KEY, note text)")
        conn.execute("INSERT INTO newer_things VALUES (1, 'kept by a newer build')")
        conn.execute("ALTER TABLE memory_spaces ADD COLUMN colour text")
    report = await exported(source, tmp_path / "bundle")
    assert report.omitted == {"memory_spaces": ["colour"], "newer_things": ["id", "note"]}
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_bytes())
    assert manifest["omitted"] == report.omitted
    assert set(NOT_CARRIED) < set(manifest["not_carried"])
    assert "memories.token_format" in manifest["not_carried"]
    target = new_target()
    summary = tmp_path / "summary.json"
    done = await cortexctl("import", "--bundle", str(tmp_path / "bundle"), "--database-url",
                           target, "--summary", str(summary))
    assert done.returncode == 0, done.stderr
    assert "INCOMPLETE" in done.stderr and "newer_things (id, note)" in done.stderr
    imported = json.loads(summary.read_text())
    assert imported["ok"] and imported["complete"] is False
    assert imported["omitted"] == report.omitted
    verified = await cortexctl("audit", "verify", "--deep", "--database-url", target,
                               "--summary", str(summary))
    assert verified.returncode == 1, verified.stdout + verified.stderr
    verdict = json.loads(summary.read_text())
    assert verdict["ok"] is False and "error" not in verdict
    assert verdict["first_mismatch"].startswith("incomplete_restore: ")
    assert "newer_things" in verdict["first_mismatch"]


async def test_records_of_an_older_build_are_adopted_after_import(
    make_cortex: MakeCortex, new_target: Callable[[], str], keys: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bundle of a build before ADR 0087's ``record`` kind (simulated: op records without
    side rows) imports, lists its records for adoption, and the target's first start covers
    them: the deep audit then verifies (the import refused it before: ``missing_event``
    for each). Beside a record a newer build covered, an uncovered one is still refused."""
    source_dsn = new_target()
    with monkeypatch.context() as before:
        async def none(*_: Any) -> list[Any]:
            return []
        before.setattr(spoke_audit, "_records", none)
        source = await served(make_cortex, source_dsn, keys, tmp_path)
        await spoke(source, "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1"})
        for placement in ({"context_id": "c1"}, {"shared": True}):
            await spoke(source, "memory.records.create", {
                "space_id": "kb", "subject_id": "u1", "content": {"text": "older"},
                "placement": placement})
    await exported(source_dsn, tmp_path / "bundle")
    # the same rows beside one a newer build covered: an uncovered row is refused there
    await spoke(source, "memory.records.create", {
        "space_id": "kb", "subject_id": "u1", "content": {"text": "newer"},
        "placement": {"shared": True}})
    await exported(source_dsn, tmp_path / "mixed")
    with pytest.raises(BundleError) as refused:
        await import_bundle(new_target(), tmp_path / "mixed")
    assert refused.value.code == "rows_do_not_match_chain"

    target = new_target()
    imported = await import_bundle(target, tmp_path / "bundle")
    assert imported.complete
    with psycopg.connect(target) as conn:
        listed = conn.execute("SELECT count(*) FROM spoke_records_to_adopt").fetchone()
    assert listed == (2,)
    restored = await served(make_cortex, target, keys, tmp_path)
    reply = await restored.call("owner", "GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200 and reply.body["deep"]["ok"], reply.text
    assert reply.body["deep"]["spoke"]["record"] == 2
