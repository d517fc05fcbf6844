"""Workload manifests for the control-plane tests: pure builders returning kubectl-ready JSON.

Callers: tests/kube/test_workloads.py, test_storage.py, test_node_heartbeat.py. Images are
never pulled: kwok runs pods on a fake node.
"""

from __future__ import annotations

import json

from hack.support.kube import FAIL_ANNOTATION, FAIL_MESSAGE_ANNOTATION

IMAGE = "registry.k8s.io/pause:3.10"


def _pod_template(app: str, *, restart: str = "Always", annotations: dict[str, str] | None = None,
                  mounts: list[dict[str, str]] | None = None) -> dict[str, object]:
    return {
        "metadata": {"labels": {"app": app}, "annotations": annotations or {}},
        "spec": {"restartPolicy": restart,
                 "containers": [{"name": app, "image": IMAGE, "volumeMounts": mounts or []}]},
    }


def deployment(name: str, *, replicas: int) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": _pod_template(name)},
    })


def statefulset(name: str, *, replicas: int, volume_size: str | None = None) -> str:
    """A StatefulSet and its headless Service; with ``volume_size`` a ``data`` claim template
    in the default StorageClass, mounted at /data."""
    mounts = None if volume_size is None else [{"name": "data", "mountPath": "/data"}]
    spec: dict[str, object] = {"replicas": replicas, "serviceName": name,
                               "selector": {"matchLabels": {"app": name}},
                               "template": _pod_template(name, mounts=mounts)}
    if volume_size is not None:
        spec["volumeClaimTemplates"] = [{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": volume_size}}}}]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"app": name},
                        "ports": [{"port": 80}]}}
    workload = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
                "spec": spec}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, workload]})


def job(name: str, *, completions: int, backoff_limit: int = 0,
        fail_message: str | None = None) -> str:
    """A Job whose pods exit 0, or with ``fail_message`` exit 1 with that message (kwok)."""
    annotations = ({} if fail_message is None
                   else {FAIL_ANNOTATION: "true", FAIL_MESSAGE_ANNOTATION: fail_message})
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completions": completions, "backoffLimit": backoff_limit,
                 "template": _pod_template(name, restart="Never", annotations=annotations)},
    })


def pod_with_sidecar(name: str) -> str:
    """A pod with an init container that runs to completion and a native sidecar."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"initContainers": [{"name": "init", "image": IMAGE},
                                    {"name": "sidecar", "image": IMAGE,
                                     "restartPolicy": "Always"}],
                 "containers": [{"name": "main", "image": IMAGE}]},
    })
