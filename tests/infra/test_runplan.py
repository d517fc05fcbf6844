"""``make run`` builds only what its example needs (issue 43, ADR 0119): the default cortex
neither CloudNativePG nor MinIO nor kwok (their cold builds were 259 s, 411 s and 246 s of a
48 min first run), ``CORTEX=ha`` adds CloudNativePG and the MinIO its backups go to. The
choice is a pure function of the MemoryCortex (literals below); the plan that ``make run``
prints with an empty cache is what the build scripts would make, read without building."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack import runplan

ROOT = Path(__file__).resolve().parents[2]
BASE = ["control plane", "node"]


def names(manifest: dict[str, Any]) -> list[str]:
    return [group.name for group in runplan.groups_for(manifest)]


def test_a_managed_database_needs_the_node_and_nothing_of_cloudnativepg_or_minio() -> None:
    managed = {"spec": {"database": {"managed": {"storage": {"size": "1Gi"}}}}}
    assert names(managed) == [*BASE, "images"]
    assert names({}) == [*BASE, "images"]  # everything defaulted


def test_cloudnativepg_adds_its_manager_and_a_backup_adds_the_object_store() -> None:
    cnpg: dict[str, Any] = {"instances": 3}
    assert names({"spec": {"database": {"cloudNativePG": cnpg}}}) == [
        *BASE, "CloudNativePG", "images"]
    cnpg["backup"] = {"objectStore": {"bucket": "b"}}
    assert names({"spec": {"database": {"cloudNativePG": cnpg}}}) == [
        *BASE, "CloudNativePG", "object store (MinIO)", "images"]


def test_a_logical_backup_or_restore_of_any_cortex_adds_the_object_store() -> None:
    logical = {"spec": {"backup": {"logical": {"objectStore": {"bucket": "b"}}}}}
    assert names(logical) == [*BASE, "object store (MinIO)", "images"]
    restore = {"spec": {"restore": {"logical": {"objectStore": {"path": "p"}}}}}
    assert names(restore) == [*BASE, "object store (MinIO)", "images"]


def test_each_group_says_what_it_is_for_and_its_cold_time() -> None:
    groups = runplan.groups_for({"spec": {"database": {"cloudNativePG": {
        "backup": {"objectStore": {}}}}}})
    assert all(group.purpose and group.cold_s > 0 for group in groups)
    assert [g.components for g in groups][:4] == [("control-plane",), ("node-base",), ("cnpg",),
                                                  ("minio",)]


@pytest.mark.parametrize(("cortex", "extra"), [
    ("managed", set()), ("ha", {"cnpg", "minio"})])
def test_the_shipped_examples_choose_as_documented(cortex: str, extra: set[str]) -> None:
    folder = "cortex-ha" if cortex == "ha" else "cortex"
    manifest = yaml.safe_load((ROOT / "examples" / folder / "memorycortex.yaml").read_text())
    built = {c for group in runplan.groups_for(manifest) for c in group.components}
    assert built == {"control-plane", "node-base"} | extra


def plan(cache: Path, *args: str) -> str:
    """hack/run.py --plan (what `make run` runs) against an empty cache: builds nothing."""
    done = subprocess.run([sys.executable, str(ROOT / "hack" / "run.py"), "--plan", *args],
                          env={**os.environ, "ATTESTED_CORTEX_CACHE": str(cache)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def to_build(text: str) -> set[str]:
    return {c for line in text.splitlines() if line.strip().startswith("to build:")
            for c in line.split(":", 1)[1].split()}


@pytest.mark.spawns
def test_a_cold_make_run_builds_no_cloudnativepg_minio_or_kwok(tmp_path: Path) -> None:
    """Before: the control plane's default list (kwok too) and `ensure-binaries.sh node`
    (CloudNativePG and MinIO too) on every make run."""
    default = plan(tmp_path)
    control_plane = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                     "kubectl", "helm"}
    node = {"kubelet", "kube-proxy", "coredns", "crictl"}
    assert to_build(default) == control_plane | node, default
    assert "first time: about" in default  # each group's cold time before its first build
    ha = plan(tmp_path, "--cortex", "ha")
    assert to_build(ha) == control_plane | node | {"cnpg", "minio"}, ha
    assert not list(tmp_path.iterdir())  # a plan builds (and writes) nothing


@pytest.mark.spawns
def test_make_run_builds_through_the_plan_only(tmp_path: Path) -> None:
    """The Makefile's run recipe adds no build of its own (node-deps, the previous release)."""
    dry = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ATTESTED_CORTEX_CACHE": str(tmp_path)},
                         timeout=60, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "hack/run.py --cortex managed" in dry.stdout
    for build in ("ensure-binaries.sh", "build-previous.sh", "images/build.sh"):
        assert build not in dry.stdout, dry.stdout


def test_the_last_times_of_an_older_make_run_carry_over_to_the_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache from before the groups keeps saying what the builds cost (the step names
    changed, not what was built)."""
    from hack import run

    timings = tmp_path / "run-timings.json"
    timings.write_text(json.dumps({
        "control-plane binaries (hack/k8s/ensure-binaries.sh)": {"last_s": 0.1, "cold_s": 1260},
        "images (hack/images/build.sh)": 232.0}))
    monkeypatch.setattr(run, "TIMINGS", timings)
    seen = run._timings()
    assert seen["control plane"] == {"last_s": 0.1, "cold_s": 1260.0}
    assert seen["images"] == {"last_s": 232.0, "cold_s": 232.0}
    assert run._hint({}, runplan.NODE.cold_s) == "first time: about 7 min on 2 cores"
