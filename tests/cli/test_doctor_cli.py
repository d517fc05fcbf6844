"""``cortexctl doctor``: the live picture, from a configuration or from a running server."""

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.support.served import CORTEXCTL, serve

from attested_cortex.cli.doctor import transcript_lines


def cortexctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CORTEXCTL, *args], capture_output=True, text=True, timeout=120)


def test_doctor_local_lists_hooks_by_event(migrated_pg15_dsn: str, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(yaml.safe_dump({"version": 1, "hooks": [{
        "name": "guard", "events": ["pre_store"], "mode": "exec", "timeout_ms": 1000,
        "command": [sys.executable, "-c", "print('{}')"]}]}))
    config = tmp_path / "cortex.yaml"
    config.write_text(yaml.safe_dump({"database_url": migrated_pg15_dsn,
                                      "hooks_file": str(hooks), "graph_backend": "CTE"}))
    result = cortexctl("doctor", "--config", str(config), "--hooks")
    assert result.returncode == 0, result.stderr
    assert "graph backend    cte" in result.stdout
    assert "guard" in result.stdout and "pre_store" in result.stdout


def test_doctor_remote_reads_capabilities(migrated_pg15_dsn: str, tmp_path: Path) -> None:
    with serve(migrated_pg15_dsn, tmp_path) as served:
        result = cortexctl("doctor", "--server", served.base, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["auth"]["mode"] == "dev"


@pytest.mark.spawns  # cortexctl as a subprocess
def test_doctor_errors_are_clear() -> None:
    nothing = cortexctl("doctor")
    assert nothing.returncode == 1 and "give --server URL" in nothing.stderr
    down = cortexctl("doctor", "--server", "http://127.0.0.1:1")
    assert down.returncode == 1 and "cannot reach" in down.stderr
    scheme = cortexctl("doctor", "--server", "file:///etc/passwd")
    assert scheme.returncode == 1 and "http(s) URL" in scheme.stderr


def test_doctor_reports_where_transcripts_are_kept_and_what_is_held(
    migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    config = tmp_path / "cortex.yaml"
    config.write_text(yaml.safe_dump({"transcripts": {
        "enabled": True, "retention_days": 30, "prune_after_days": 3,
        "namespaces": [{"namespace": "support/**", "retention_days": 90},
                       {"namespace": "scratch/*", "retention_days": 1}]}}))
    with serve(migrated_pg15_dsn, tmp_path, "--config", str(config)) as served:
        request = urllib.request.Request(
            f"{served.base}/v1/transcripts", method="POST",
            data=json.dumps({"namespace": "support/acme", "content": "user: hi\n" * 50}).encode(),
            headers={"X-Agent-Id": "dev:tester", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            stored = json.load(reply)
        result = cortexctl("doctor", "--server", served.base)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("transcripts"))
    assert lines[start] == (
        "transcripts      on: zstd level 3, at most 1048576 bytes each")
    assert lines[start + 1].split() == ["support/**", "kept", "90", "days"]
    assert lines[start + 2].split() == ["scratch/*", "kept", "1", "day"]
    assert lines[start + 3].split() == [
        "retention", "30", "days", "cortex-wide;", "archived", "transcripts", "pruned",
        "after", "3", "days"]
    assert lines[start + 4].split() == [
        "counts", "1", "stored,", "0", "archived,", "0", "pruned;",
        str(stored["stored_bytes"]), "bytes", "at", "rest", "(450", "raw)"]
    assert lines[start + 5].split()[:5] == ["sweeper", "running,", "every", "60", "s;"]


def test_doctor_says_off_in_one_line() -> None:
    counts = {"stored": 0, "archived": 0, "pruned": 0, "stored_bytes": 0, "raw_bytes": 0}
    caps: dict[str, Any] = {
        "enabled": False, "namespaces": [], "default_retention_days": None, "counts": counts,
        "sweeper": {"running": False, "interval_seconds": 60, "last": None}}
    assert transcript_lines(caps) == ["transcripts      off"]
    held = {**caps, "default_retention_days": 30,
            "counts": {**counts, "archived": 2, "stored_bytes": 80, "raw_bytes": 400}}
    assert [line.split()[0] for line in transcript_lines(held)] == [
        "transcripts", "retention", "counts"]  # off, but old ones still age out
