"""``cortexctl migrate`` over a schema_migrations table edited by hand: one clear line on
stderr and exit 1, never a traceback (issue 13)."""

import subprocess

import psycopg
import pytest
from hack.support.served import CORTEXCTL

from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA
from tests.support.postgres import Database


def cortexctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CORTEXCTL, *args], capture_output=True, text=True, timeout=120)


def one_clear_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cortexctl migrate: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("version", [MAX_SUPPORTED_SCHEMA, 1])
def test_migrate_after_a_deleted_row_is_one_clear_line(migrated_pg15_dsn: str,
                                                       version: int) -> None:
    # The newest row gone: the migration is re-applied and the schema refuses it. An older
    # row gone: the gap is named before anything runs.
    with psycopg.connect(migrated_pg15_dsn) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (version,))
    expected = (f"migration {version:04d}_" if version == MAX_SUPPORTED_SCHEMA
                else f"lacks version {version}")
    one_clear_line(cortexctl("migrate", "--database-url", migrated_pg15_dsn), expected)


def test_migrate_with_a_negative_version_is_one_clear_line(migrated_pg15_dsn: str) -> None:
    with psycopg.connect(migrated_pg15_dsn) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) "
                     "VALUES (-1, 'odd', 'x')")
    result = cortexctl("migrate", "--database-url", migrated_pg15_dsn)
    one_clear_line(result, "version -1")
    assert "newer than this build" not in result.stderr


def test_migrate_as_a_role_without_create_is_one_clear_line(pg15_database: Database) -> None:
    # PostgreSQL 15 grants CREATE on schema public to nobody: the store translates the
    # refusal (StoragePrivilegeError) instead of letting the driver's exception out.
    one_clear_line(cortexctl("migrate", "--database-url", pg15_database.app_dsn),
                   "lacks a privilege", "permission denied")
