"""Security contexts that pass the "restricted" Pod Security Standard. Pure data."""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]


def pod_security(*, user: int, group: int) -> Object:
    """Pod-level: non-root, a fixed uid/gid, volumes owned by the group, RuntimeDefault."""
    return {"runAsNonRoot": True, "runAsUser": user, "runAsGroup": group, "fsGroup": group,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security(*, read_only_root: bool = True) -> Object:
    """Container-level: no privilege escalation, no capabilities, read-only root."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": read_only_root,
            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def resources(requirements: Any) -> Object:
    """A CRD ``ResourceRequirements`` (or None) as a container's ``resources``."""
    if requirements is None:
        return {}
    dumped: Object = requirements.model_dump(exclude_none=True)
    return dumped
