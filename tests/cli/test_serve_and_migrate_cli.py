"""``cortexctl serve`` and ``cortexctl migrate`` as processes: exit codes, messages, logs."""

import json
import subprocess
import urllib.request
from pathlib import Path

import psycopg
import pytest
from hack.support.served import CORTEXCTL, serve

from attested_cortex.server.tokens import generate
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA


def cortexctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CORTEXCTL, *args], capture_output=True, text=True, timeout=120)


def test_migrate_cli_plan_apply_and_idempotence(pg15_dsn: str) -> None:
    dry = cortexctl("migrate", "--database-url", pg15_dsn, "--dry-run")
    assert dry.returncode == 0 and "would apply 0001_memories" in dry.stdout
    partial = cortexctl("migrate", "--database-url", pg15_dsn, "--target", "1")
    assert partial.returncode == 0 and "schema version 0 -> 1" in partial.stdout
    full = cortexctl("migrate", "--database-url", pg15_dsn)
    assert full.returncode == 0 and f"-> {MAX_SUPPORTED_SCHEMA}" in full.stdout
    again = cortexctl("migrate", "--database-url", pg15_dsn)
    assert again.returncode == 0 and "applied" not in again.stdout


def test_newer_database_refused_by_migrate_and_serve(migrated_pg15_dsn: str) -> None:
    with psycopg.connect(migrated_pg15_dsn) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, checksum) "
                     "VALUES (999, 'future', 'x')")
    for args in (("migrate",), ("serve", "--listen", "127.0.0.1:1")):
        result = cortexctl(*args, "--database-url", migrated_pg15_dsn)
        assert result.returncode == 1
        assert "newer than this build supports" in result.stderr


def test_dev_auth_refused_off_loopback(migrated_pg15_dsn: str) -> None:
    result = cortexctl("serve", "--database-url", migrated_pg15_dsn, "--listen", "0.0.0.0:8080")
    assert result.returncode == 1 and "only allowed on loopback" in result.stderr


@pytest.mark.spawns
def test_unreachable_database_is_a_clear_error() -> None:
    result = cortexctl("migrate", "--database-url", "postgresql://nobody@127.0.0.1:1/none")
    assert result.returncode == 1 and "cortexctl migrate:" in result.stderr


def test_logs_are_json_with_request_ids_and_no_token(
    migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} agent-1\n")
    with serve(migrated_pg15_dsn, tmp_path, "--auth", "tokens",
               "--tokens-file", str(tmp_path / "tokens")) as served:
        request = urllib.request.Request(
            f"{served.base}/v1/capabilities", headers={"Authorization": f"Bearer {token}",
                                                       "X-Request-Id": "req-42"})
        with urllib.request.urlopen(request, timeout=15) as response:
            assert json.load(response)["auth"]["mode"] == "tokens"
    lines = [json.loads(line) for line in served.log.read_text().splitlines() if line.strip()]
    assert any(e.get("request_id") == "req-42" and e.get("status") == 200 for e in lines)
    assert token not in served.log.read_text()


def test_age_backend_requested_where_missing_is_a_startup_error(migrated_pg15_dsn: str) -> None:
    result = cortexctl("serve", "--database-url", migrated_pg15_dsn, "--graph-backend", "AGE",
                       "--listen", "127.0.0.1:1")
    assert result.returncode == 1
    assert "graph backend AGE was requested" in result.stderr


def test_invalid_hook_file_is_a_startup_error(migrated_pg15_dsn: str, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("version: 1\nhooks: [{name: h1, events: [pre_nothing], command: [x]}]\n")
    result = cortexctl("serve", "--database-url", migrated_pg15_dsn, "--hooks-file", str(hooks),
                       "--listen", "127.0.0.1:1")
    assert result.returncode == 1 and "h1" in result.stderr
