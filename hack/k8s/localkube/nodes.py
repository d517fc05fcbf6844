"""The fake node that kwok manages, and the readiness conditions checked after start.

Callers: controlplane.py. Pure builders and predicates over the API's JSON.
"""

from __future__ import annotations

NODE_NAME = "kwok-node-0"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def build_fake_node(name: str = NODE_NAME) -> dict[str, object]:
    """A Node without taints, so ordinary workloads schedule onto it and kwok runs them."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
        "status": {"capacity": _RESOURCES, "allocatable": _RESOURCES},
    }


def node_is_ready(node: object) -> bool:
    if not isinstance(node, dict):
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
