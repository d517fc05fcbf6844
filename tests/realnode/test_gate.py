"""The gate of the real-node tests: on a machine without the node's binaries and images they
are skipped, and the run says so loudly with the command that builds them (always runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spawns  # each test runs pytest itself, in a subprocess

ROOT = Path(__file__).resolve().parents[2]


def test_missing_node_pieces_skip_loudly(tmp_path: Path) -> None:
    env = {**os.environ, "ATTESTED_CORTEX_CACHE": str(tmp_path)}  # an empty cache
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header",
         "tests/realnode/test_pods.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 skipped" in result.stdout
    assert "!!! 2 real-node tests SKIPPED" in result.stdout
    assert "hack/k8s/ensure-binaries.sh node" in result.stdout
    assert "hack/images/build.sh" in result.stdout
    assert "build them with: make node-deps" in result.stdout


def test_missing_node_pieces_skip_the_e2e_flows_loudly(tmp_path: Path) -> None:
    """e2e/ runs in `make test` behind the same gate (no E2E_NAMESPACE: no script's cluster)."""
    env = {key: value for key, value in os.environ.items() if key != "E2E_NAMESPACE"}
    env["ATTESTED_CORTEX_CACHE"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header", "e2e"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " skipped" in result.stdout and " passed" not in result.stdout
    assert "real-node tests SKIPPED" in result.stdout
    assert "build them with: make node-deps" in result.stdout
