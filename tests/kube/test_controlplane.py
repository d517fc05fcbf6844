"""The local control plane is the real thing: pinned versions, RBAC on, service accounts work.

Runs against the session ``kube`` fixture (tests/support/kube.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hack.support.kube import Kube, service_account_user

pytestmark = pytest.mark.kube
VERSIONS_ENV = Path(__file__).resolve().parents[2] / "hack" / "k8s" / "versions.env"


def _pinned(name: str) -> str:
    for line in VERSIONS_ENV.read_text().splitlines():
        if line.startswith(f"{name}="):
            return line.partition("=")[2].strip()
    raise AssertionError(f"{name} is not pinned in {VERSIONS_ENV}")


def _tool_output(kube: Kube, tool: str, *args: str) -> str:
    return kube.run(tool, *args).stdout


def test_the_api_server_reports_the_pinned_kubernetes_version(kube: Kube) -> None:
    versions = json.loads(kube.kubectl("version", "-o", "json").stdout)
    assert versions["serverVersion"]["gitVersion"] == _pinned("KUBERNETES_VERSION")
    assert versions["clientVersion"]["gitVersion"] == _pinned("KUBERNETES_VERSION")
    assert versions["serverVersion"]["gitTreeState"] == "clean"


@pytest.mark.parametrize(("tool", "args", "pinned"), [
    ("kube-apiserver", ("--version",), "KUBERNETES_VERSION"),
    ("kube-controller-manager", ("--version",), "KUBERNETES_VERSION"),
    ("kube-scheduler", ("--version",), "KUBERNETES_VERSION"),
    ("helm", ("version", "--short"), "HELM_VERSION"),
])
def test_each_binary_reports_its_pinned_version(kube: Kube, tool: str, args: tuple[str, ...],
                                                pinned: str) -> None:
    assert _pinned(pinned) in _tool_output(kube, tool, *args)


def test_etcd_is_the_pinned_release(kube: Kube) -> None:
    assert f"etcd Version: {_pinned('ETCD_VERSION').removeprefix('v')}" in _tool_output(
        kube, "etcd", "--version")


def test_rbac_forbids_an_unprivileged_service_account(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("create", "serviceaccount", "nobody", "-n", kube_namespace)
    nobody = service_account_user(kube_namespace, "nobody")
    denied = kube.impersonate_kubectl(nobody, "get", "secrets", "-n", kube_namespace,
                                      check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()
    can_i = kube.kubectl("auth", "can-i", "create", "pods", "-n", kube_namespace,
                         f"--as={nobody}", check=False)
    assert can_i.stdout.strip() == "no"


def test_the_admin_is_a_cluster_admin(kube: Kube) -> None:
    assert kube.kubectl("auth", "can-i", "*", "*", "--all-namespaces").stdout.strip() == "yes"


def test_service_account_tokens_are_issued_and_accepted(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("create", "serviceaccount", "robot", "-n", kube_namespace)
    token = kube.kubectl("create", "token", "robot", "-n", kube_namespace).stdout.strip()
    ca = kube.kubectl("config", "view", "--raw", "-o",
                      "jsonpath={.clusters[0].cluster.certificate-authority}").stdout
    whoami = kube.kubectl("--kubeconfig=/dev/null", f"--server={kube.server}",
                          f"--certificate-authority={ca}", f"--token={token}",
                          "auth", "whoami", "-o", "json")
    user = json.loads(whoami.stdout)["status"]["userInfo"]["username"]
    assert user == service_account_user(kube_namespace, "robot")


def test_new_namespaces_get_the_cluster_ca(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("wait", "-n", kube_namespace, "--for=create", "configmap/kube-root-ca.crt",
                 "--timeout=60s")
    kube.kubectl("wait", "-n", kube_namespace, "--for=create", "serviceaccount/default",
                 "--timeout=60s")


def test_helm_renders_for_the_pinned_kubernetes_minor(kube: Kube, tmp_path: Path) -> None:
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates" / "kube.yaml").write_text(
        "# {{ .Capabilities.KubeVersion.Major }}.{{ .Capabilities.KubeVersion.Minor }}\n")
    major, minor = _pinned("KUBERNETES_VERSION").removeprefix("v").split(".")[:2]
    rendered = kube.helm("template", "probe", str(chart)).stdout
    assert f"# {major}.{minor}" in rendered
