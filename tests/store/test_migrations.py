"""Migrations on a real server: idempotent, serialized, and refusing what they must."""

import asyncio

import psycopg
import pytest

from attested_cortex.errors import MigrationChecksumError, SchemaTooNewError
from attested_cortex.store.migrating import migrate, planned
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA, MIGRATIONS


def applied_versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]


async def test_migrate_applies_all_then_is_a_no_op(any_dsn: str) -> None:
    first = await migrate(any_dsn)
    assert first.before == 0 and first.after == MAX_SUPPORTED_SCHEMA
    assert first.applied[0] == "0001_memories"
    again = await migrate(any_dsn)
    assert again.applied == () and again.after == MAX_SUPPORTED_SCHEMA
    # every shipped version (numbers reserved for branches not merged yet may be missing)
    assert applied_versions(any_dsn) == [m.version for m in MIGRATIONS]


async def test_two_migrators_at_once_both_end_well(pg15_dsn: str) -> None:
    results = await asyncio.gather(migrate(pg15_dsn), migrate(pg15_dsn), migrate(pg15_dsn))
    applied = [name for r in results for name in r.applied]
    assert sorted(applied) == sorted(set(applied))  # every migration applied exactly once
    assert all(r.after == MAX_SUPPORTED_SCHEMA for r in results)


async def test_target_stops_and_dry_run_changes_nothing(pg15_dsn: str) -> None:
    await migrate(pg15_dsn, target=1)
    assert applied_versions(pg15_dsn) == [1]
    plan = await planned(pg15_dsn)
    assert plan.current == 1 and plan.pending[0].version == 2
    assert applied_versions(pg15_dsn) == [1]


async def test_changed_checksum_refused(pg15_dsn: str) -> None:
    await migrate(pg15_dsn)
    with psycopg.connect(pg15_dsn) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(MigrationChecksumError):
        await migrate(pg15_dsn)


async def test_newer_database_refused(pg15_dsn: str) -> None:
    await migrate(pg15_dsn)
    with psycopg.connect(pg15_dsn) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) "
                     "VALUES (999, 'future', 'x')")
    with pytest.raises(SchemaTooNewError, match="999"):
        await migrate(pg15_dsn)
