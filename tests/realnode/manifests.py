"""Manifests the real-node tests apply: the database and the server as the operator runs them.

Callers: tests/realnode/test_pods.py. Pure builders (JSON is valid kubectl input). Both pods
satisfy the restricted Pod Security Standard (the namespace enforces it): non-root with fixed
ids, no privilege escalation, every capability dropped, RuntimeDefault seccomp, read-only root
file system with emptyDirs where the program writes.
"""

from __future__ import annotations

import json

POSTGRES_IMAGE = "docker.io/attested-cortex/postgres-age:17"
CORTEX_IMAGE = "docker.io/attested-cortex/cortex:0.1.0"


def _restricted(uid: int) -> dict[str, object]:
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"}}


_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                       "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def namespace(name: str, *, restricted: bool = True) -> dict[str, object]:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"} if restricted else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def database(namespace_name: str, password: str) -> list[dict[str, object]]:
    """Secret, claim (the ``local`` class), pod and Service of one PostgreSQL + AGE."""
    labels = {"app": "postgres"}
    database_url = (f"postgresql://postgres:{password}@postgres.{namespace_name}"
                    ".svc.cluster.local:5432/cortex")
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
         "stringData": {"password": password, "url": database_url}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "postgres", "labels": labels},
         "spec": {
             "securityContext": _restricted(999),
             "containers": [{
                 "name": "postgres", "image": POSTGRES_IMAGE, "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "POSTGRES_PASSWORD_FILE", "value": "/secrets/password"}],
                 "ports": [{"containerPort": 5432, "name": "postgres"}],
                 "securityContext": _CONTAINER_SECURITY,
                 "readinessProbe": {"exec": {"command": ["pg_isready", "-q", "-h",
                                                         "/var/run/postgresql"]},
                                    "periodSeconds": 2},
                 "volumeMounts": [
                     {"name": "data", "mountPath": "/var/lib/postgresql/data"},
                     {"name": "run", "mountPath": "/var/run/postgresql"},
                     {"name": "tmp", "mountPath": "/tmp"},
                     {"name": "secret", "mountPath": "/secrets", "readOnly": True}],
             }],
             "volumes": [
                 {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                 {"name": "run", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
                 {"name": "secret", "secret": {"secretName": "db"}}],
         }},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "postgres"},
         "spec": {"selector": labels, "ports": [{"port": 5432, "targetPort": "postgres"}]}},
    ]


def server(token_hash: str, agent: str) -> list[dict[str, object]]:
    """``cortexctl migrate`` (init container) then ``cortexctl serve`` against the database,
    which it finds by its Service's DNS name (CoreDNS + kube-proxy). Off loopback the server
    needs real authentication: a bearer token for ``agent`` (from ``tokens.generate``), whose
    hex hash ``token_hash`` is in a Secret."""
    labels = {"app": "cortex"}
    url_env = [{"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "db",
                                                                          "key": "url"}}}]
    mounts = [{"name": "tmp", "mountPath": "/tmp"}]
    token_line = f"{token_hash} {agent}\n"
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tokens"},
         "stringData": {"tokens": token_line}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cortex", "labels": labels},
         "spec": {
             "securityContext": _restricted(65532),
             "initContainers": [{
                 "name": "migrate", "image": CORTEX_IMAGE, "imagePullPolicy": "IfNotPresent",
                 "args": ["migrate", "--database-url", "$(DATABASE_URL)"], "env": url_env,
                 "securityContext": _CONTAINER_SECURITY, "volumeMounts": mounts}],
             "containers": [{
                 "name": "serve", "image": CORTEX_IMAGE, "imagePullPolicy": "IfNotPresent",
                 "args": ["serve", "--database-url", "$(DATABASE_URL)",
                          "--listen", "0.0.0.0:8080", "--auth", "tokens",
                          "--tokens-file", "/secrets/tokens"],
                 "env": url_env, "ports": [{"containerPort": 8080, "name": "http"}],
                 "securityContext": _CONTAINER_SECURITY,
                 "volumeMounts": [*mounts, {"name": "tokens", "mountPath": "/secrets",
                                            "readOnly": True}],
                 "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                                    "periodSeconds": 2},
             }],
             "volumes": [{"name": "tmp", "emptyDir": {}},
                         {"name": "tokens", "secret": {"secretName": "tokens"}}],
         }},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cortex"},
         "spec": {"selector": labels, "ports": [{"port": 8080, "targetPort": "http"}]}},
    ]


def as_input(objects: list[dict[str, object]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
