"""hack/pg/ensure-age-root.sh: reuses a built root, is safe to run concurrently, fails loudly.

The build itself (debootstrap, minutes) runs once per machine through ``make deps``; these tests use
the root it left in the cache, plus throw-away cache directories for the rejection paths.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest
from hack.support.pgservers import AGE_ROOT_STAMP, age_root

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack/pg/ensure-age-root.sh"
EXTRAS_STAMP = ".attested-cortex-extras"
pytestmark = pytest.mark.age


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.fixture(scope="module")
def built_root() -> Path:
    root = age_root()
    if not (root / AGE_ROOT_STAMP).is_file():
        pytest.fail(f"no PostgreSQL+AGE root at {root}; run: hack/pg/ensure-age-root.sh",
                    pytrace=False)
    return root


def test_built_root_has_postgresql_17_age_and_pgvector(built_root: Path) -> None:
    listing = subprocess.run(["chroot", str(built_root), "ls", "/usr/lib/postgresql/17/lib"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "age.so" in listing
    assert "vector.so" in listing
    assert "pgvector" in (built_root / EXTRAS_STAMP).read_text()


def test_a_root_with_an_older_stamp_is_upgraded_in_place(built_root: Path,
                                                          tmp_path: Path) -> None:
    """A root built before pgvector joined (no extras stamp) is completed, not rebuilt: here every
    package is present already, so the run only checks the root and renews its stamp (adding
    a missing package was exercised against the Debian mirror when this path was written)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run(["cp", "-a", str(built_root), str(cache / "pg-age-trixie")], check=True)
    root = cache / "pg-age-trixie"
    (root / EXTRAS_STAMP).unlink()
    done = _run("--print-root", env={"ATTESTED_CORTEX_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(root)
    assert "adding nothing to the existing root" in done.stderr
    assert (root / EXTRAS_STAMP).read_text() == (built_root / EXTRAS_STAMP).read_text()
    # the base stamp keeps the text older copies of the script accept (no rebuild by them)
    assert (root / AGE_ROOT_STAMP).read_text() == \
        "pg-age-trixie v1: postgresql-17 postgresql-17-age\n"
    again = _run("--print-root", env={"ATTESTED_CORTEX_CACHE": str(cache)})
    assert again.returncode == 0 and again.stderr == ""


def test_two_concurrent_runs_on_a_built_root_both_succeed(built_root: Path) -> None:
    runs = [subprocess.Popen([str(SCRIPT), "--print-root"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert [out.strip() for out, _ in results] == [str(built_root)] * 2
    assert [err for _, err in results] == ["", ""]


def test_a_run_waiting_on_a_concurrent_build_reuses_its_result(
    built_root: Path, tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    root = cache / "pg-age-trixie"
    root.mkdir(parents=True)
    stamp = (built_root / AGE_ROOT_STAMP).read_text()
    (root / EXTRAS_STAMP).write_text((built_root / EXTRAS_STAMP).read_text())
    with (cache / "pg-age-trixie.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # "another build" holds the lock
        env = {**os.environ, "ATTESTED_CORTEX_CACHE": str(cache)}
        waiting = subprocess.Popen([str(SCRIPT), "--print-root"], stdout=subprocess.PIPE,
                                   text=True, env=env)
        (root / AGE_ROOT_STAMP).write_text(stamp)  # ... which completes
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0
    assert out.strip() == str(root)
    assert sorted(p.name for p in cache.iterdir()) == ["pg-age-trixie", "pg-age-trixie.lock"]


def test_missing_debootstrap_fails_with_the_fixing_command(tmp_path: Path) -> None:
    done = _run(env={"ATTESTED_CORTEX_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    assert "debootstrap is missing" in done.stderr
    assert "hack/ensure-system-packages.sh" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_argument_is_rejected_with_usage() -> None:
    done = _run("--rebuild")
    assert done.returncode == 2
    assert "usage:" in done.stderr
