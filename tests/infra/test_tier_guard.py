"""The fast tier stays fast (issue 43, ADR 0120): a test with no tier marker that starts a
process fails, naming the command and the marker, so a spawning test cannot slip into
``make test-fast`` unmarked; marked ``spawns`` (or with its service's marker) it passes. One
pytest run in a subprocess over two throw-away test files (about 2 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = '''
import subprocess, sys
import pytest

def test_unmarked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.spawns
def test_marked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_unmarked_pure():
    assert sum([1, 2]) == 3
'''

pytestmark = pytest.mark.spawns  # a pytest run in a subprocess


def test_an_unmarked_test_that_starts_a_process_fails_naming_the_marker(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n"
                                        "markers =\n    spawns: starts processes\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "operator"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "tests.support.tiers", "-rE", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "3 passed, 1 error" in out, out  # the unmarked spawner errs at its teardown
    assert "test_unmarked_starts_a_process" in out and "mark it spawns" in out, out
    assert "-c', 'pass']" in out, out  # the command it started
