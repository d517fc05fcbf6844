"""What rests plain beside sealed spoke-memory rows (issue 37 item 15, ADR 0089).

With encryption at rest on, every spoke-memory surface that stores text is written once
with a unique marker (a record's text and its structured fields, a profile, a captured
candidate, a reflection over the record), then a ``pg_dump`` of the whole database is
scanned: the tables holding a marker must be exactly the columns docs/keys.md lists as
plain (its ``plain-beside-sealed`` block), and the record's text must rest nowhere but
in the reflection that quotes it (documented). A column sealed later, or a new plain one,
fails here until the docs say so.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

from hack.support.pgservers import PG15_BIN

from attested_cortex.attest import masterkeys as mk
from tests.server.test_encryption_at_rest import marker
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, REFLECTING, ok
from tests.support.cortex import MakeCortex

DOCS = Path(__file__).resolve().parents[2] / "docs" / "keys.md"


def documented() -> dict[str, str]:
    """table -> column of the docs' plain-beside-sealed block."""
    block = DOCS.read_text(encoding="utf-8").split("```plain-beside-sealed\n")[1]
    lines = block.split("```")[0].strip().splitlines()
    return dict(line.split(":", 1)[0].split(".") for line in lines)


def tables_holding(dumped: str, text: str) -> set[str]:
    """The tables whose COPY section of a data-only dump holds ``text``."""
    found = set()
    for section in re.split(r"\nCOPY ", dumped)[1:]:
        table = section.split(" ", 1)[0].removeprefix("public.")
        if text in section.split("\n\\.\n", 1)[0]:
            found.add(table)
    return found


async def test_only_the_documented_spoke_columns_rest_plain(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        master_key={"file": key}, encryption={"at_rest": True})
    text, structured, profile, proposed = (marker() for _ in range(4))
    subject = {"space_id": "kb", "subject_id": "u1"}
    await ok(team, "owner", "memory.subjects.ensure", {**subject, "kind": "person:human"})
    await ok(team, "owner", "memory.records.create", {
        **subject, "content": {"text": f"{text} walks at dawn. Every day.",
                               "structured": {"habit": structured}},
        "placement": {"shared": True}})
    await ok(team, "owner", "memory.profile.update", {**subject, "kind": "personality",
                                                      "text": f"Calm {profile}."})
    await ok(team, "owner", "memory.capture", {**subject, "capture_scope": {"shared": True},
                                               "items": [{"text": proposed}]})
    await ok(team, "owner", "memory.reflections.generate", subject, flags=REFLECTING)

    done = await asyncio.to_thread(
        subprocess.run, [f"{PG15_BIN}/pg_dump", "--data-only", "-d", migrated_pg15_dsn],
        check=True, capture_output=True, timeout=60)
    dumped = done.stdout.decode()
    plain = documented()
    where = {name: tables_holding(dumped, value) for name, value in (
        ("structured", structured), ("profile", profile), ("proposed", proposed),
        ("text", text))}
    assert where == {
        "structured": {"memory_records"}, "profile": {"memory_profiles", "memory_reflections"},
        "proposed": {"memory_candidates"}, "text": {"memory_reflections"}}, where
    assert set().union(*where.values()) == set(plain), (where, plain)
    assert plain == {"memory_records": "structured", "memory_candidates": "proposed",
                     "memory_profiles": "text", "memory_reflections": "text"}
