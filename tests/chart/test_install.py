"""The chart applies to the real API server (server-side dry run), installs, upgrades and
uninstalls, and its pod template passes the restricted Pod Security Standard."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from hack.support.chart import CHART, install
from hack.support.kube import Kube

from attested_cortex.crd import KINDS
from tests.chart.conftest import by_kind, render

pytestmark = pytest.mark.kube


def test_rendered_chart_passes_server_side_dry_run(kube: Kube, fresh_namespace: str) -> None:
    for sets in ([], ["operator.watchAllNamespaces=true"]):
        objects = render(*sets, namespace=fresh_namespace)
        manifest = yaml.safe_dump_all(objects)
        kube.kubectl(
            "apply",
            "--dry-run=server",
            "--server-side",
            "--force-conflicts",
            "-n",
            fresh_namespace,
            "-f",
            "-",
            input=manifest,
        )


def test_pod_template_is_admitted_under_restricted_pod_security(kube: Kube) -> None:
    namespace = f"restricted-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", namespace)
    kube.kubectl("create", "serviceaccount", "-n", namespace, "operator")
    kube.kubectl(
        "label",
        "--overwrite",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
    )
    template = by_kind(render(namespace=namespace), "Deployment")[0]["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "operator-pss", "labels": template["metadata"]["labels"]},
        "spec": {**template["spec"], "serviceAccountName": "default"},
    }
    result = kube.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(pod), check=False
    )
    assert result.returncode == 0, result.stderr
    assert "PodSecurity" not in result.stderr
    privileged = {**pod, "spec": {**pod["spec"], "securityContext": {}}}
    refused = kube.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(privileged),
        check=False,
    )
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr
    kube.kubectl("delete", "namespace", namespace, "--wait=false")


def test_install_upgrade_and_uninstall_keep_the_crds(kube: Kube, fresh_namespace: str) -> None:
    release = install(kube, "ac", fresh_namespace)
    deployment = f"deployment/{release.name}-attested-cortex-operator"
    kube.kubectl("rollout", "status", "-n", fresh_namespace, deployment, "--timeout=120s")
    for kind in KINDS:
        crd = json.loads(kube.kubectl("get", "crd", kind.crd_name, "-o", "json").stdout)
        assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == release.name
    kube.helm(
        "upgrade",
        release.name,
        str(CHART),
        "-n",
        fresh_namespace,
        "--wait",
        "--timeout=120s",
        "--set",
        "operator.logLevel=debug",
    )
    history = json.loads(
        kube.helm("history", release.name, "-n", fresh_namespace, "-o", "json").stdout
    )
    assert [entry["status"] for entry in history] == ["superseded", "deployed"]
    env = json.loads(
        kube.kubectl(
            "get",
            "-n",
            fresh_namespace,
            deployment,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env}",
        ).stdout
    )
    assert {"name": "ATTESTED_CORTEX_LOG_LEVEL", "value": "debug"} in env
    kube.helm("uninstall", release.name, "-n", fresh_namespace, "--wait")
    for kind in KINDS:
        kube.kubectl("get", "crd", kind.crd_name)


def test_notes_say_how_to_start(kube: Kube) -> None:
    out = kube.helm(
        "install", "rel", str(CHART), "--dry-run=client", "--take-ownership", "-n", "ns"
    ).stdout
    assert "kind: MemoryCortex" in out
    assert "kubectl -n ns rollout status deployment/rel-attested-cortex-operator" in out


def test_notes_say_what_is_not_watched_and_how_an_upgrade_can_strand_the_operator(
        kube: Kube) -> None:
    # Issue 21: a MemoryCortex applied outside the release namespace got no status at all,
    # and `helm upgrade --set image.tag=<missing>` left no operator running until a rollback.
    out = kube.helm(
        "install", "rel", str(CHART), "--dry-run=client", "--take-ownership", "-n", "ns"
    ).stdout
    assert "applied in any other namespace is\nignored and gets no status at all" in out
    assert "the Recreate strategy stops this operator before the new one starts" in out
    everywhere = kube.helm(
        "install", "rel", str(CHART), "--dry-run=client", "--take-ownership", "-n", "ns",
        "--set", "operator.watchAllNamespaces=true"
    ).stdout
    assert "read and write every Secret in the cluster" in everywhere
    assert "no status at all" not in everywhere
