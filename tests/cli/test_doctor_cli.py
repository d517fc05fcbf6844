"""``cortexctl doctor``: the live picture, from a configuration or from a running server."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.served import CORTEXCTL, serve


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


def test_doctor_errors_are_clear() -> None:
    nothing = cortexctl("doctor")
    assert nothing.returncode == 1 and "give --server URL" in nothing.stderr
    down = cortexctl("doctor", "--server", "http://127.0.0.1:1")
    assert down.returncode == 1 and "cannot reach" in down.stderr
    scheme = cortexctl("doctor", "--server", "file:///etc/passwd")
    assert scheme.returncode == 1 and "http(s) URL" in scheme.stderr
