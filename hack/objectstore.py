"""MinIO as a pod of the real node: the object store of the backup e2e and ``make run CORTEX=ha``.

Callers: e2e/test_backup.py, hack/run.py (``make run CORTEX=ha``), bench/backup.py.

ADR 0037: MinIO's server, unmodified, built from its Go module (``hack/k8s/ensure-binaries.sh
minio``) and wrapped FROM scratch by ``hack/images/build.sh`` (``images/minio``); a test and
development fixture, never part of the chart. :func:`manifests` (pure) is everything it runs
as: its own namespace, the root credentials Secret, its own PersistentVolumeClaim, a one-pod
Deployment (``Recreate``: one writer of the volume) meeting the "restricted" Pod Security
Standard, and a Service. :func:`credentials_secret` is the Secret a cortex's
``backup.objectStore.credentialsSecretRef`` names, in the cortex's namespace.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ROOT / "hack" / "k8s" / "versions.env"
NAMESPACE: Final = "objectstore"
NAME: Final = "minio"
PORT: Final = 9000
UID: Final = 65532
#: The field manager of everything applied here.
MANAGER: Final = "attested-cortex-objectstore"
Object = dict[str, Any]


def image() -> str:
    """The image hack/images/build.sh builds around the server (tag: the pseudo-version's
    date and commit)."""
    for line in VERSIONS.read_text().splitlines():
        if line.startswith("MINIO_VERSION="):
            return f"docker.io/attested-cortex/minio:{line.split('=', 1)[1].strip()[7:]}"
    raise LookupError(f"no MINIO_VERSION in {VERSIONS}")


def endpoint(namespace: str = NAMESPACE) -> str:
    """The in-cluster S3 endpoint (what ``backup.objectStore.endpoint`` names)."""
    return f"http://{NAME}.{namespace}.svc:{PORT}"


def _secret(name: str, namespace: str, data: dict[str, str]) -> Object:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def credentials_secret(name: str, namespace: str, *, access_key: str,
                       secret_key: str) -> Object:
    """The Secret CloudNativePG's instances read (keys ACCESS_KEY_ID, ACCESS_SECRET_KEY)."""
    return _secret(name, namespace, {"ACCESS_KEY_ID": access_key,
                                     "ACCESS_SECRET_KEY": secret_key})


def _container(server_image: str) -> Object:
    secure = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
              "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}
    env = [{"name": key, "valueFrom": {"secretKeyRef": {"name": NAME, "key": key}}}
           for key in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD")]
    env += [{"name": "MINIO_BROWSER", "value": "off"}, {"name": "MINIO_UPDATE", "value": "off"}]
    probe = {"httpGet": {"path": "/minio/health/ready", "port": PORT}, "periodSeconds": 2}
    return {"name": NAME, "image": server_image, "imagePullPolicy": "IfNotPresent",
            "args": ["server", "/data", "--address", f":{PORT}", "--console-address", ":9001",
                     "--certs-dir", "/scratch/certs", "--quiet"],
            "env": env, "ports": [{"name": "s3", "containerPort": PORT}],
            "readinessProbe": probe, "securityContext": secure,
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                          "limits": {"memory": "512Mi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                             {"name": "scratch", "mountPath": "/scratch"}]}


def manifests(*, access_key: str, secret_key: str, size: str = "2Gi",
              namespace: str = NAMESPACE, server_image: str | None = None) -> list[Object]:
    """Namespace, root Secret, PVC, Deployment and Service of the object store."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "attested-cortex-dev"}
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    pod = {"metadata": {"labels": labels}, "spec": {
        "automountServiceAccountToken": False, "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                            "fsGroup": UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(server_image or image())],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": NAME}},
                    {"name": "scratch", "emptyDir": {"sizeLimit": "16Mi"}}]}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted"}}},
        _secret(NAME, namespace, {"MINIO_ROOT_USER": access_key,
                                  "MINIO_ROOT_PASSWORD": secret_key}),
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                  "selector": {"matchLabels": labels}, "template": pod}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": labels, "ports": [{"name": "s3", "port": PORT,
                                                 "targetPort": PORT}]}},
    ]


@dataclass(frozen=True)
class Installer:
    """Applies the manifests with ``kubectl`` (a callable running kubectl args)."""

    kubectl: Callable[..., subprocess.CompletedProcess[str]]
    namespace: str = NAMESPACE

    def apply(self, documents: list[Object]) -> None:
        text = "\n".join(json.dumps(d) for d in documents)
        done = self.kubectl("apply", "--server-side", f"--field-manager={MANAGER}",
                            "-f", "-", input=text)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl apply of the object store failed: {done.stderr}")

    def pod_ip(self) -> str | None:
        """The server pod's IP (the host reaches it through the node's bridge)."""
        done = self.kubectl("-n", self.namespace, "get", "pods", "-l",
                            f"app.kubernetes.io/name={NAME}", "-o",
                            "jsonpath={.items[0].status.podIP}")
        return done.stdout.strip() or None if done.returncode == 0 else None

    def ready(self) -> bool:
        done = self.kubectl("-n", self.namespace, "get", "deployment", NAME, "-o",
                            "jsonpath={.status.readyReplicas}")
        return done.returncode == 0 and done.stdout.strip() not in ("", "0")

    def scale(self, replicas: int) -> None:
        """0 makes the store unreachable (the e2e's outage); 1 brings it back, data kept."""
        self.kubectl("-n", self.namespace, "scale", "deployment", NAME,
                     f"--replicas={replicas}")

    def uninstall(self) -> None:
        self.kubectl("delete", "namespace", self.namespace, "--ignore-not-found",
                     "--wait=false")
