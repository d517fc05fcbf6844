"""The CloudNativePG side of a ``cloudNativePG`` cortex, as kubectl sees it: its Cluster's
primary and replicas, a switchover the way ``kubectl cnpg promote`` asks for one, SIGKILL of a
postgres, and the deep audit run inside a server pod.

Callers: e2e/test_ha.py and bench/ha.py. Each function runs kubectl through a ``Kubectl``
callable (the e2e's or the bench's), so the same moves serve both.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from attested_cortex.builders.clusters import cluster_name

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

CLUSTER_API = "clusters.postgresql.cnpg.io"




def memorycortex(name: str, namespace: str, *, instances: int = 3,
                 synchronous: int | None = 1) -> dict[str, Any]:
    """A MemoryCortex on CloudNativePG, as a user writes it (the issue's example)."""
    database: dict[str, Any] = {"instances": instances, "storage": {"size": "1Gi"}}
    if synchronous:
        database["synchronous"] = {"number": synchronous}
    return {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "MemoryCortex",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"database": {"cloudNativePG": database},
                     "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                     "permissions": {"mode": "Off"}, "transcripts": {"enabled": True}}}


def get_json(kubectl: Kubectl, *args: str) -> Any:
    done = kubectl(*args, "-o", "json")
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
    return json.loads(done.stdout)


def cluster_status(kubectl: Kubectl, namespace: str, cortex: str) -> dict[str, Any]:
    found = get_json(kubectl, "get", "-n", namespace, f"{CLUSTER_API}/{cluster_name(cortex)}")
    return dict(found.get("status") or {})


def primary(kubectl: Kubectl, namespace: str, cortex: str) -> str:
    return str(cluster_status(kubectl, namespace, cortex)["currentPrimary"])


def instance_pods(kubectl: Kubectl, namespace: str, cortex: str) -> list[str]:
    pods = get_json(kubectl, "get", "pods", "-n", namespace, "-l",
                    f"cnpg.io/cluster={cluster_name(cortex)},cnpg.io/podRole=instance")
    return sorted(p["metadata"]["name"] for p in pods["items"]
                  if not p["metadata"].get("deletionTimestamp"))


def healthy(kubectl: Kubectl, namespace: str, cortex: str, instances: int) -> bool:
    """Every instance ready, one primary that is the target, and CNPG says healthy."""
    status = cluster_status(kubectl, namespace, cortex)
    return (status.get("readyInstances") == instances
            and status.get("currentPrimary") == status.get("targetPrimary")
            and status.get("phase") == "Cluster in healthy state")


def promote(kubectl: Kubectl, namespace: str, cortex: str, pod: str) -> None:
    """A switchover to ``pod`` as ``kubectl cnpg promote`` does it (CNPG 1.27's plugin patches
    the Cluster's status: targetPrimary, its timestamp, the Switchover phase), guarded by the
    resourceVersion as the plugin's optimistic lock is."""
    found = get_json(kubectl, "get", "-n", namespace, f"{CLUSTER_API}/{cluster_name(cortex)}")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"metadata": {"resourceVersion": found["metadata"]["resourceVersion"]},
             "status": {"targetPrimary": pod, "targetPrimaryTimestamp": now,
                        "phase": "Switchover in progress",
                        "phaseReason": f"Switching over to {pod}"}}
    done = kubectl("patch", "-n", namespace, f"{CLUSTER_API}/{cluster_name(cortex)}",
                   "--subresource=status", "--type=merge", "-p", json.dumps(patch))
    if done.returncode != 0:
        raise AssertionError(f"switchover to {pod} refused: {done.stderr}")


def kill_postgres(kubectl: Kubectl, namespace: str, pod: str) -> None:
    """SIGKILL the postmaster inside the instance's container (PID 1 there is CNPG's instance
    manager, which sees its postgres die)."""
    done = kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "sh", "-c",
                   'kill -KILL "$(head -n 1 "$PGDATA/postmaster.pid")"')
    if done.returncode != 0:
        raise AssertionError(f"kill -KILL of postgres in {pod}: {done.stderr}")


def rows(kubectl: Kubectl, namespace: str, cortex: str, query: str) -> list[list[str]]:
    """``query``'s rows read on the primary (psql in its postgres container, as the
    database's superuser over the local socket): what the cortex holds, seen from the
    database itself."""
    pod = primary(kubectl, namespace, cortex)
    done = kubectl("exec", "-n", namespace, pod, "-c", "postgres", "--", "psql", "-d", "cortex",
                   "-AtF", "\t", "-v", "ON_ERROR_STOP=1", "-c", query)
    if done.returncode != 0:
        raise AssertionError(f"psql on {pod}: {done.stderr}")
    return [line.split("\t") for line in done.stdout.splitlines() if line]


def deep_audit(kubectl: Kubectl, namespace: str, cortex: str,
               keyed: bool = False) -> subprocess.CompletedProcess[str]:
    """``cortexctl audit verify --deep`` in a server pod, against the database it serves
    (``keyed``: with the master key ring the pod mounts, so the HMAC-keyed chain too)."""
    ring = " --master-key-dir /var/run/cortex/master-key" if keyed else ""
    return kubectl("exec", "-n", namespace, f"deployment/{cortex}-server", "-c", "server", "--",
                   "sh", "-c", 'exec cortexctl audit verify --deep '
                   f'--database-url "$CORTEX_DATABASE_URL"{ring}')
