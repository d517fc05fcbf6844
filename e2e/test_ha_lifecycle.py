"""A cloudNativePG cortex when CloudNativePG comes late, and when our operator dies mid-creation.

Runs after e2e/test_ha.py (file order), on the same release: first the HA cortex is deleted and
CloudNativePG uninstalled (its CRDs go, as ``kubectl delete -f`` of the release does); a new
cortex then says CloudNativePGMissing with the command to install it; CloudNativePG is
installed again and the cortex proceeds to Ready with the same operator pod, never restarted.
Last, the operator process is SIGKILLed from the node while it creates another cortex's
Cluster: once its container is back, there is one Cluster, one application Secret and one
migration run. One-instance Clusters keep these cases short; the three-instance behaviour is
test_ha's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hack.support.waiting import wait_until
from tests.support.cnpg import CloudNativePG

from e2e import hacluster
from e2e.conftest import kubectl, kubectl_json
from e2e.test_ha import CORTEX as HA_CORTEX

LATE = "late-memory"
KILLED = "killed-memory"
READY = "420s"
OPERATOR = "app.kubernetes.io/name=attested-cortex,app.kubernetes.io/component=operator"


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _operator_pod(namespace: str) -> dict[str, Any]:
    pods = [p for p in kubectl_json("get", "pods", "-n", namespace, "-l", OPERATOR)["items"]
            if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return dict(pods[0])


def _restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount", 0)) for c in pod["status"].get("containerStatuses", []))


def _condition(namespace: str, name: str, kind: str) -> dict[str, Any]:
    status = kubectl_json("get", f"memorycortex/{name}", "-n", namespace).get("status") or {}
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def _ready(namespace: str, name: str) -> None:
    done = kubectl("wait", "-n", namespace, "--for=condition=Ready", f"--timeout={READY}",
                   f"memorycortex/{name}")
    assert done.returncode == 0, done.stderr + kubectl(
        "get", "-n", namespace, "mcx,cluster,pods,jobs", "-o", "wide").stdout


def test_cloudnativepg_installed_late_the_cortex_proceeds_without_an_operator_restart(
        namespace: str, cnpg: CloudNativePG) -> None:
    kubectl("delete", f"memorycortex/{HA_CORTEX}", "-n", namespace, "--ignore-not-found",
            "--wait=true", "--timeout=180s")
    cnpg.uninstall()
    wait_until(lambda: kubectl("get", "crd", "clusters.postgresql.cnpg.io").returncode != 0,
               seconds=180, interval_s=1.0, what="CloudNativePG's CRD gone")
    operator = _operator_pod(namespace)
    ok(kubectl("apply", "-f", "-", input=json.dumps(
        hacluster.memorycortex(LATE, namespace, instances=1, synchronous=None))))
    wait_until(lambda: _condition(namespace, LATE, "DatabaseReady").get("reason")
               == "CloudNativePGMissing", seconds=120, interval_s=1.0,
               what="DatabaseReady=False, CloudNativePGMissing")
    message = _condition(namespace, LATE, "DatabaseReady")["message"]
    assert "kubectl apply --server-side" in message, message
    print(f"\nCNPG installed again in {cnpg.install():.0f}s")
    _ready(namespace, LATE)
    again = _operator_pod(namespace)
    assert again["metadata"]["uid"] == operator["metadata"]["uid"]
    assert _restarts(again) == _restarts(operator)


def _host_pids(pod_uid: str, needle: str) -> list[int]:
    """Processes of the pod (by its cgroup) whose command line contains ``needle``."""
    marks = (pod_uid, pod_uid.replace("-", "_"))
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(m in cgroup for m in marks) and needle in command:
            found.append(int(entry.name))
    return found


def test_the_operator_killed_while_creating_a_cluster_converges_to_one_of_everything(
        namespace: str, cnpg: CloudNativePG) -> None:
    operator = _operator_pod(namespace)
    ok(kubectl("apply", "-f", "-", input=json.dumps(
        hacluster.memorycortex(KILLED, namespace, instances=1, synchronous=None))))
    cluster = hacluster.cluster_name(KILLED)
    wait_until(lambda: kubectl("get", "-n", namespace, f"{hacluster.CLUSTER_API}/{cluster}")
               .returncode == 0, seconds=120, interval_s=0.2, what="the Cluster applied")
    pids = _host_pids(operator["metadata"]["uid"], "operator")
    if not pids:
        pytest.fail(f"no operator process of pod {operator['metadata']['name']} on this node")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _restarts(_operator_pod(namespace)) > _restarts(operator), seconds=120,
               interval_s=0.5, what="the operator container restarted")
    _ready(namespace, KILLED)
    clusters = kubectl_json("get", hacluster.CLUSTER_API, "-n", namespace, "-l",
                            f"app.kubernetes.io/instance={KILLED}")["items"]
    assert [c["metadata"]["name"] for c in clusters] == [cluster]
    secrets = kubectl_json("get", "secrets", "-n", namespace, "-l",
                           f"cnpg.io/cluster={cluster},cnpg.io/userType=app")["items"]
    assert len(secrets) == 1, [s["metadata"]["name"] for s in secrets]
    jobs = kubectl_json("get", "jobs", "-n", namespace, "-l",
                        f"app.kubernetes.io/instance={KILLED}")["items"]
    assert len(jobs) == 1 and jobs[0]["status"].get("succeeded") == 1, jobs
    for name in (LATE, KILLED):
        kubectl("delete", f"memorycortex/{name}", "-n", namespace, "--wait=false")
