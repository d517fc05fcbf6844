"""Spoke-memory records of a cortex with memories sealed at rest (ADR 0065 with ADR 0068):
the listing, which reads the authorized records in SQL, and a record's get answer the text
the records were written with, while the memory rows hold none of it."""

from __future__ import annotations

from pathlib import Path

import psycopg

from attested_cortex.attest import masterkeys as mk
from tests.server.test_encryption_at_rest import marker
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok
from tests.support.cortex import MakeCortex


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
