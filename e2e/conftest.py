"""End-to-end checks against a real cluster with the chart installed.

Two ways in:

* ``make e2e`` (e2e/realnode.sh) and ``make e2e-kind`` (e2e/kind.sh) start a cluster, install
  the chart and set ``KUBECONFIG`` and ``E2E_NAMESPACE`` (the release namespace); kubectl and
  helm come from ``PATH``.
* ``make test`` (no ``E2E_NAMESPACE``): the tests ask for the session's real node
  (tests.support.realnode, the same gate as tests/realnode: they run when the node's
  binaries and images exist, and are skipped loudly otherwise) and install the chart with the
  cached helm into a fresh namespace enforcing the restricted Pod Security Standard.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.support.realnode", "tests.support.cnpg"]

ROOT = Path(__file__).resolve().parents[1]
RELEASE = "attested-cortex"
CHART = ROOT / "charts" / "attested-cortex"
IMAGE_VALUES = ("--set", "image.repository=attested-cortex/cortex", "--set", "image.tag=0.1.0",
                "--set", "image.pullPolicy=IfNotPresent", "--set",
                "operator.defaults.postgresImage=attested-cortex/postgres-age:17")


@dataclass
class Target:
    """Where kubectl and helm point: a kubeconfig (None: the environment's) and a bin dir."""

    kubeconfig: str | None = None
    bin_dir: Path | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.kubeconfig:
            env["KUBECONFIG"] = self.kubeconfig
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '')}"
        return env


TARGET = Target()


def external() -> bool:
    """Whether a script set up the cluster and release (make e2e, make e2e-kind)."""
    return "E2E_NAMESPACE" in os.environ


def run(tool: str, *args: str, input: str | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run kubectl or helm against the e2e cluster (bounded)."""
    return subprocess.run([tool, *args], input=input, capture_output=True, text=True,
                          timeout=timeout, check=False, env=TARGET.env())


def kubectl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run kubectl against the e2e cluster."""
    return run("kubectl", *args, input=input)


def helm(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run helm against the e2e cluster, its state under a scratch home."""
    return run("helm", *args, timeout=timeout)


def kubectl_json(*args: str) -> Any:
    """kubectl ... -o json, parsed (fails the test on error)."""
    result = kubectl(*args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a script's cluster, e2e tests need the real node: same gate as tests/realnode.
    test_system.py runs last whatever the file names (it ends with ``helm uninstall``);
    test_upgrade.py first (it hands the CRDs to the previous release while it runs, so no
    other test may have objects of our kinds yet)."""
    order = {"test_upgrade.py": 1, "test_system.py": 3}

    def rank(item: pytest.Item) -> int:
        path = Path(str(item.fspath))
        return order.get(path.name, 2) if path.is_relative_to(ROOT / "e2e") else 0

    items.sort(key=rank)
    if external():
        return
    for item in items:
        if Path(str(item.fspath)).is_relative_to(ROOT / "e2e"):
            item.add_marker(pytest.mark.realnode)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def namespace(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> str:
    """The release namespace (the chart installed and its operator Available)."""
    if external():
        if "KUBECONFIG" not in os.environ:
            pytest.fail("E2E_NAMESPACE set without KUBECONFIG")
        return os.environ["E2E_NAMESPACE"]
    cluster = request.getfixturevalue("real_node")
    TARGET.kubeconfig, TARGET.bin_dir = str(cluster.kubeconfig), cluster.bin_dir
    helm_home = tmp_path_factory.mktemp("helm")
    for variable in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        os.environ[variable] = str(helm_home / variable.lower())
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    assert kubectl("create", "namespace", name).returncode == 0
    kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    installed = helm("install", RELEASE, str(CHART), "--namespace", name, *IMAGE_VALUES,
                     "--wait", "--timeout", "3m")
    assert installed.returncode == 0, installed.stderr
    return name


@pytest.fixture(autouse=True)
def _installed(namespace: str) -> None:
    """Every e2e test runs against the installed release (and so behind the gate)."""
