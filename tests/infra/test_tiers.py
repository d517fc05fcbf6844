"""The test tiers are selections by marker (tests/support/tiers.py): what a test needs is read
from the fixtures it asks for, directly or through other fixtures, so `make test-fast` leaves out
exactly the tests that start a service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = (
    "tests/store/test_recall_halves.py",      # pg15_dsn, asked for directly
    "tests/graph/test_backends.py",           # pg15_conn / age_conn: fixtures built on the servers
    "tests/operator/test_cloudnativepg.py",   # the control plane, through the operator fixtures
    "tests/builders/test_access.py",          # pure builders
)


def selected(marks: str) -> set[str]:
    """The sample files with a test that ``-m marks`` selects."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marks, *SAMPLES],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode in (0, 5), run.stdout + run.stderr
    return {line.split("::")[0] for line in run.stdout.splitlines() if "::" in line}


def test_the_fast_tier_leaves_out_every_test_that_starts_a_service() -> None:
    assert selected("not pg and not age and not kube and not realnode and not tools") == {
        "tests/builders/test_access.py"}


def test_a_service_marker_follows_the_fixture_closure() -> None:
    assert selected("pg") == {"tests/store/test_recall_halves.py", "tests/graph/test_backends.py"}
    assert selected("kube") == {"tests/operator/test_cloudnativepg.py"}
