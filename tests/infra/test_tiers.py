"""The test tiers are selections by marker (tests/support/tiers.py): what a test needs is read
from the fixtures it asks for, directly or through other fixtures, so `make test-fast` leaves out
exactly the tests that start a service."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spawns  # a pytest collection in a subprocess

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = (
    "tests/store/test_recall_halves.py",      # pg15_dsn, asked for directly
    "tests/graph/test_backends.py",           # pg15_conn / age_conn: fixtures built on the servers
    "tests/operator/test_cloudnativepg.py",   # the control plane, through the operator fixtures
    "tests/builders/test_access.py",          # pure builders
)
TIERS = ("pg", "age", "kube", "realnode", "tools")
#: A plugin for the collecting run: one line per test, its file and the tier markers it has.
REPORTER = '''
TIERS = {tiers!r}
def pytest_collection_finish(session):
    for item in session.items:
        marks = sorted({{m.name for m in item.iter_markers()}} & set(TIERS))
        print("TIERS", item.nodeid.split("::")[0], ",".join(marks))
'''


@pytest.fixture(scope="module")
def tiers_by_file(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[frozenset[str]]]:
    """Each sample file -> the sets of tier markers its tests carry (one collection run)."""
    folder = tmp_path_factory.mktemp("reporter")
    (folder / "tier_reporter.py").write_text(REPORTER.format(tiers=TIERS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "tier_reporter", *SAMPLES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    found: dict[str, set[frozenset[str]]] = {}
    for line in run.stdout.splitlines():
        if line.startswith("TIERS "):
            _, path, marks = (line + " ").split(" ", 2)
            found.setdefault(path, set()).add(frozenset(filter(None, marks.strip().split(","))))
    return found


def selected(tiers: dict[str, set[frozenset[str]]], wanted: str | None) -> set[str]:
    """The sample files with a test carrying the ``wanted`` tier (None: carrying none)."""
    return {path for path, each in tiers.items()
            if any((not marks) if wanted is None else wanted in marks for marks in each)}


def test_the_fast_tier_leaves_out_every_test_that_starts_a_service(
        tiers_by_file: dict[str, set[frozenset[str]]]) -> None:
    assert selected(tiers_by_file, None) == {"tests/builders/test_access.py"}


def test_a_service_marker_follows_the_fixture_closure(
        tiers_by_file: dict[str, set[frozenset[str]]]) -> None:
    assert selected(tiers_by_file, "pg") == {"tests/store/test_recall_halves.py",
                                             "tests/graph/test_backends.py"}
    assert selected(tiers_by_file, "kube") == {"tests/operator/test_cloudnativepg.py"}
