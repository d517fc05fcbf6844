"""Workload manifests for the control-plane tests: pure builders returning kubectl-ready JSON.

Callers: tests/kube/test_workloads.py. Images are never pulled: kwok runs pods on a fake node.
"""

from __future__ import annotations

import json

IMAGE = "registry.k8s.io/pause:3.10"


def _pod_template(app: str, *, restart: str = "Always") -> dict[str, object]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"restartPolicy": restart,
                 "containers": [{"name": app, "image": IMAGE}]},
    }


def deployment(name: str, *, replicas: int) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": _pod_template(name)},
    })


def statefulset(name: str, *, replicas: int) -> str:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"app": name},
                        "ports": [{"port": 80}]}}
    workload = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
                "spec": {"replicas": replicas, "serviceName": name,
                         "selector": {"matchLabels": {"app": name}},
                         "template": _pod_template(name)}}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, workload]})


def job(name: str, *, completions: int) -> str:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": completions, "backoffLimit": 0,
                 "template": _pod_template(name, restart="Never")},
    })
