"""``make run``'s own steps (hack/run.py) without the real node: the HA variant's set-up on a
fresh cluster (the real control plane: its API server refuses a Secret in a namespace that
does not exist yet), the ``export PATH`` line of the walkthrough, and the build hints that
keep a component's cold time across warm runs. The whole run on the real node is
tests/realnode/test_make_run.py."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack import run
from hack.support.kube import Kube


@pytest.fixture
def fresh_cluster(kube: Kube, monkeypatch: pytest.MonkeyPatch,
                  tmp_path: Path) -> Iterator[run.Cluster]:
    """hack/run.py's Cluster against the control plane, its namespace not created yet."""
    namespace = f"run-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(run, "NAMESPACE", namespace)
    images = tmp_path / "images"
    images.mkdir()
    (images / "minio.tar").touch()  # the object store is installed (its pod is kwok's)
    monkeypatch.setattr(run, "images_dir", lambda: images)
    cluster = run.Cluster(kube.kubeconfig, kube.bin_dir, tmp_path)
    yield cluster
    for name in (namespace, "objectstore"):
        kube.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found",
                     check=False)


@pytest.mark.kube
def test_the_ha_set_up_works_on_a_fresh_cluster(fresh_cluster: run.Cluster, kube: Kube,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: the object store's credentials Secret was applied before the cortex's
    namespace existed ("namespaces attested-cortex not found") on every fresh node."""
    installed: list[bool] = []
    monkeypatch.setattr(run, "install_cloudnativepg", lambda *_: None)  # its own namespace
    monkeypatch.setattr(run, "install", lambda _, *, ha: installed.append(ha))
    run.set_up(fresh_cluster, kube.bin_dir, ha=True)
    assert installed == [True]
    secret = json.loads(kube.kubectl("get", "secret", run.BACKUP_CREDENTIALS, "-n",
                                     run.NAMESPACE, "-o", "json").stdout)
    assert set(secret["data"]) == {"ACCESS_KEY_ID", "ACCESS_SECRET_KEY"}
    namespace = json.loads(kube.kubectl("get", "namespace", run.NAMESPACE, "-o",
                                        "json").stdout)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_walkthrough_puts_the_nodes_kubectl_and_the_plugin_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    text = run.walkthrough(tmp_path / "kubeconfig", "NAME READY\n", "http://127.0.0.1:1",
                           tmp_path / "token", tmp_path / "logs", bin_dir=bin_dir)
    exports = [line.strip() for line in text.splitlines()
               if line.strip().startswith("export PATH=")]
    assert len(exports) == 1, text
    entries = exports[0].split()[1].removeprefix("PATH=").split(":")
    assert entries[0] == str(bin_dir)  # the node's kubectl before the host's own
    plugin_dirs = [Path(entry) for entry in entries if entry != "$PATH"]
    assert any((d / "kubectl-cortex").exists() for d in plugin_dirs), entries
    assert entries[-1] == "$PATH"
    assert "kubectl cortex -n" in text and " status team-memory" in text


@pytest.mark.spawns
def test_a_cached_build_keeps_the_cold_time_and_says_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    timings = tmp_path / "run-timings.json"
    monkeypatch.setattr(run, "TIMINGS", timings)
    timings.write_text(json.dumps({"images": 2700.0}))  # an older make run: one float a step
    run.build_step("images", [sys.executable, "-c", "pass"])
    first = capsys.readouterr().out
    assert "(last time 2700s)" in first and "images cached (" in first, first
    run.build_step("images", [sys.executable, "-c", "pass"])
    second = capsys.readouterr().out
    assert "cached last time" in second and "cold 2700s" in second, second
    assert "images cached (" in second
    kept = json.loads(timings.read_text())["images"]
    assert kept["cold_s"] == 2700.0 and kept["last_s"] < run.CACHED_S
    assert os.stat(timings).st_size < 200
