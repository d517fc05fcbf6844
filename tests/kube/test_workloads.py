"""Workloads run on the kwok fake node: Deployments and StatefulSets get Ready pods, Jobs finish.

Every wait is a bounded ``kubectl wait``/``rollout status`` on a condition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hack.support.kube import Kube

from tests.kube import manifests

pytestmark = pytest.mark.kube
WAIT = "--timeout=120s"


def _pods(kube: Kube, namespace: str, app: str) -> list[dict[str, Any]]:
    out = kube.kubectl("get", "pods", "-n", namespace, "-l", f"app={app}", "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def test_the_fake_node_is_ready(kube: Kube) -> None:
    kube.kubectl("wait", "--for=condition=Ready", "node/kwok-node-0", WAIT)


def test_a_deployment_gets_ready_pods_on_the_fake_node(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.deployment("web", replicas=3))
    kube.kubectl("rollout", "status", "-n", kube_namespace, "deployment/web", WAIT)
    kube.kubectl("wait", "-n", kube_namespace, "--for=condition=Available", "deployment/web", WAIT)
    pods = _pods(kube, kube_namespace, "web")
    assert len(pods) == 3
    assert {pod["spec"]["nodeName"] for pod in pods} == {"kwok-node-0"}
    assert {pod["status"]["phase"] for pod in pods} == {"Running"}


def test_a_statefulset_gets_ready_pods_in_order(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.statefulset("db", replicas=2))
    kube.kubectl("rollout", "status", "-n", kube_namespace, "statefulset/db", WAIT)
    kube.kubectl("wait", "-n", kube_namespace, "--for=condition=Ready", "pod/db-0", "pod/db-1",
                 WAIT)
    ready = kube.kubectl("get", "-n", kube_namespace, "statefulset/db",
                         "-o", "jsonpath={.status.readyReplicas}").stdout
    assert ready == "2"


def test_a_job_runs_to_completion(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.job("batch", completions=2))
    kube.kubectl("wait", "-n", kube_namespace, "--for=condition=Complete", "job/batch", WAIT)
    succeeded = kube.kubectl("get", "-n", kube_namespace, "job/batch",
                             "-o", "jsonpath={.status.succeeded}").stdout
    assert succeeded == "2"


def test_a_failing_job_fails_once_its_backoff_limit_is_spent(kube: Kube,
                                                              kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.job("broken", completions=1, backoff_limit=1,
                                     fail_message="migration 7 failed"))
    kube.kubectl("wait", "-n", kube_namespace, "--for=condition=Failed", "job/broken", WAIT)
    job = json.loads(kube.kubectl("get", "-n", kube_namespace, "job/broken", "-o", "json").stdout)
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert job["status"]["failed"] == 2  # the first pod and its one retry
    pods = _pods(kube, kube_namespace, "broken")
    assert {pod["status"]["phase"] for pod in pods} == {"Failed"}
    exits = [s["state"]["terminated"] for pod in pods for s in pod["status"]["containerStatuses"]]
    assert {(e["exitCode"], e["reason"], e["message"]) for e in exits} == {
        (1, "Error", "migration 7 failed")}


def test_init_containers_finish_and_native_sidecars_run(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.pod_with_sidecar("sidecar"))
    kube.kubectl("wait", "-n", kube_namespace, "--for=condition=Ready", "pod/sidecar", WAIT)
    pod = json.loads(kube.kubectl("get", "-n", kube_namespace, "pod/sidecar", "-o", "json").stdout)
    states = {s["name"]: s["state"] for s in pod["status"]["initContainerStatuses"]}
    assert states["init"]["terminated"]["exitCode"] == 0
    assert "running" in states["sidecar"]
    assert pod["status"]["containerStatuses"][0]["ready"] is True
