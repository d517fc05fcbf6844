"""Spoke-memory records of a cortex with memories sealed at rest (ADR 0065 with ADR 0068):
the listing, which reads the authorized records in SQL, and a record's get answer the text
the records were written with, while the memory rows hold none of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from hack.support.pgservers import PgServer

from attested_cortex.attest import masterkeys as mk
from attested_cortex.store.migrating import migrate
from tests.server.test_encryption_at_rest import at_rest, marker
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok, space_bundle
from tests.support.cortex import MakeCortex
from tests.support.postgres import Database


async def test_listing_and_get_open_sealed_records(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        master_key={"file": key}, encryption={"at_rest": True})
    texts = [f"{marker()} about the harbour" for _ in range(3)]
    await ok(team, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1",
                                                      "kind": "person:human"})
    ids = []
    for text in texts:
        receipt = await ok(team, "owner", "memory.records.create", {
            "space_id": "kb", "subject_id": "u1", "content": {"text": text},
            "placement": {"shared": True}})
        ids.append(receipt["refs"][0])
    page = await ok(team, "owner", "memory.records.list", {"space_id": "kb"})
    assert sorted(r["content"]["text"] for r in page["records"]) == sorted(texts)
    got = await ok(team, "owner", "memory.records.get", {"space_id": "kb", "record_id": ids[0]})
    assert got["content"] == {"text": texts[0]}
    with psycopg.connect(migrated_pg15_dsn) as conn:
        stored = conn.execute("SELECT content, key_version FROM memories").fetchall()
    assert stored and all(content == "" and version == 1 for content, version in stored)


TRANSFER = "spoke-memory, spoke-memory-transfer"
IMPORT = "00000000-0000-4000-8000-000000000027"


async def test_a_space_of_sealed_records_exports_plain_and_imports_elsewhere(
        make_cortex: MakeCortex, pg15_server: PgServer, migrated_pg15_dsn: str,
        pg15_database: Database, tmp_path: Path) -> None:
    """A space export carries the records as written (the bundle is for another provider or
    cortex: ADR 0070; the whole-cortex bundle carries the sealed form, for this cortex's
    key), another cortex with its own key imports it and answers the same records; neither
    database holds the text at rest (export and staged chunks are sealed too)."""
    made = []
    for name, dsn in (("a", migrated_pg15_dsn), ("b", pg15_database.dsn)):
        (tmp_path / name).mkdir()
        key = tmp_path / name / "master.key"
        key.write_bytes(mk.generate_key())
        if name == "b":
            await migrate(dsn)
        made.append(await agents(make_cortex, dsn, tmp_path / name, {"owner": OWNER},
                                 master_key={"file": key}, encryption={"at_rest": True}))
    source, target = made
    texts = [f"{marker()} about the harbour", f"{marker()} about the ferry"]
    await ok(source, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1",
                                                        "kind": "person:human"})
    for text, placement in zip(texts, [{"shared": True}, {"context_id": "c1"}], strict=True):
        await ok(source, "owner", "memory.records.create", {
            "space_id": "kb", "subject_id": "u1", "content": {"text": text},
            "placement": placement})
    export = await ok(source, "owner", "memory.exports.create", {"space_id": "kb"},
                      flags=TRANSFER)
    chunks: list[Any] = []
    while not chunks or not chunks[-1]["final"]:
        chunks.append(await ok(source, "owner", "memory.exports.get", {
            "space_id": "kb", "export_id": export["refs"][0], "ordinal": len(chunks)},
            flags=TRANSFER))
    records = space_bundle(chunks)["chunks/space_records-000000.jsonl"].decode()
    assert all(text in records for text in texts)  # the records as written

    await ok(target, "owner", "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u0",
                                                        "kind": "person:human"})
    for chunk in chunks:
        await ok(target, "owner", "memory.imports.stage", {
            "space_id": "kb", "import_id": IMPORT, "ordinal": chunk["ordinal"],
            "final": chunk["final"], "data": chunk["data"], "digest": chunk["digest"],
            **({"manifest_digest": chunk["manifest_digest"]} if chunk["final"] else {})},
            flags=TRANSFER)
    await ok(target, "owner", "memory.imports.activate", {"space_id": "kb",
                                                         "import_id": IMPORT}, flags=TRANSFER)
    copied = (await ok(target, "owner", "memory.records.list", {"space_id": "kb"}))["records"]
    original = (await ok(source, "owner", "memory.records.list", {"space_id": "kb"}))["records"]
    assert [(r["content"], r["placement"]) for r in copied] == [
        (r["content"], r["placement"]) for r in original]
    assert sorted(r["content"]["text"] for r in copied) == sorted(texts)

    for dsn in (migrated_pg15_dsn, pg15_database.dsn):
        dumped, files = at_rest(pg15_server, dsn)
        with psycopg.connect(dsn) as conn:  # the values as held (TOAST may compress them)
            held = b"".join(bytes(r[0]) for r in conn.execute(
                "SELECT data FROM memory_export_chunks UNION ALL"
                " SELECT data FROM memory_import_chunks"))
        for text in texts:
            assert text not in dumped and text.encode() not in files, dsn
            assert text.encode() not in held, dsn
