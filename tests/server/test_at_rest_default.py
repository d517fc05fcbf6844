"""Encryption at rest left unset (issue 27: "default off for existing cortexes, on for new
ones"; ADR 0079) on a real server and PostgreSQL: a cortex decides once, at its first start
with a master key, and keeps the answer in its database.

- A new database: on (the memory rests sealed), and still on for a later server, whatever
  the database holds by then.
- A database holding plain data from before (an existing cortex): off, its rows left plain.
- A database whose every row is sealed (a restore of a sealed cortex): on.
- No master key, or a schema before 0028: off, nothing decided.
- Two servers deciding at once: one answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from attested_cortex.attest import masterkeys as mk
from attested_cortex.store.decisions import at_rest_default
from attested_cortex.store.migrating import migrate
from tests.support.cortex import CortexClient, MakeCortex


def key_file(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "master.key"
    if not path.exists():
        path.write_bytes(mk.generate_key())
    return {"file": path}


async def at_rest(client: CortexClient) -> tuple[bool, str]:
    caps = (await client.call("GET", "/v1/capabilities")).body["encryption"]
    return caps["at_rest"], caps["at_rest_from"]


def rows(dsn: str) -> dict[str, Any]:
    """Memories by whether they rest sealed, and the recorded decisions."""
    with psycopg.connect(dsn) as conn:
        sealed = dict(conn.execute("SELECT key_version IS NOT NULL, count(*) FROM memories"
                                   " GROUP BY 1").fetchall())
        decided = dict(conn.execute("SELECT name, value FROM cortex_decisions").fetchall())
    return {"sealed": sealed, "decided": decided}


async def test_a_new_cortex_seals_and_keeps_deciding_so(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    dsn = migrated_pg15_dsn
    first = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path))
    assert await at_rest(first) == (True, "cortex default")
    stored = await first.store("kb", "the harbour pilot boards at dawn")
    assert rows(dsn) == {"sealed": {True: 1}, "decided": {"encryption.at_rest": True}}
    later = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path))
    assert await at_rest(later) == (True, "cortex default")
    found = (await later.call("POST", "/v1/recall", {"query": "pilot"})).body["results"]
    assert [r["id"] for r in found] == [stored["id"]]
    off = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path),
                            encryption={"at_rest": False})  # the setting wins
    assert await at_rest(off) == (False, "settings")


async def test_an_existing_cortex_with_plain_data_stays_plain(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    dsn = migrated_pg15_dsn
    before = await make_cortex(dsn, migrated=False)  # no master key: plain, nothing decided
    assert await at_rest(before) == (False, "cortex default")
    await before.store("kb", "written before the upgrade")
    assert rows(dsn) == {"sealed": {False: 1}, "decided": {}}
    upgraded = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path))
    assert await at_rest(upgraded) == (False, "cortex default")
    await upgraded.store("kb", "written after it")
    assert rows(dsn) == {"sealed": {False: 2}, "decided": {"encryption.at_rest": False}}


async def test_a_database_of_sealed_rows_only_decides_on(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    dsn = migrated_pg15_dsn
    sealing = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path),
                                encryption={"at_rest": True})
    await sealing.store("kb", "sealed by a cortex that asked for it")
    assert rows(dsn)["decided"] == {}  # set explicitly: nothing decided
    unset = await make_cortex(dsn, migrated=False, master_key=key_file(tmp_path))
    assert await at_rest(unset) == (True, "cortex default")


async def test_before_0028_nothing_is_decided(
        make_cortex: MakeCortex, pg15_dsn: str, tmp_path: Path) -> None:
    await migrate(pg15_dsn, target=27, graph=False)
    old = await make_cortex(pg15_dsn, migrated=False, master_key=key_file(tmp_path))
    assert await at_rest(old) == (False, "cortex default")


async def test_two_servers_deciding_at_once_agree(migrated_pg15_dsn: str) -> None:
    async def decide() -> bool | None:
        async with await psycopg.AsyncConnection.connect(
                migrated_pg15_dsn, autocommit=True, row_factory=dict_row) as conn:
            return await at_rest_default(conn)

    assert await asyncio.gather(*(decide() for _ in range(6))) == [True] * 6
    assert rows(migrated_pg15_dsn)["decided"] == {"encryption.at_rest": True}
