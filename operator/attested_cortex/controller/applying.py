"""Writes to the API server, all with one field manager: server-side apply, create-only,
replace-if-unchanged and delete; plus the reads a reconcile needs.

API errors become kopf's vocabulary here: :class:`~.kubeapi.UnavailableError` and conflicts
are temporary (the work queue retries with backoff), invalid objects and missing
permissions are permanent (reported in a condition, retried only when something changes).
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders.names import FIELD_MANAGER
from attested_cortex.controller.kubeapi import KubeApi, NotFoundError
from attested_cortex.controller.metrics import API_WRITES
from attested_cortex.crd import GROUP, VERSION

Object = dict[str, Any]

#: (apiVersion, kind) -> (plural, namespaced): every kind the operator reads or writes.
RESOURCES: Final[dict[tuple[str, str], tuple[str, bool]]] = {
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Service"): ("services", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Event"): ("events", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    (f"{GROUP}/{VERSION}", "MemoryCortex"): ("memorycortexes", True),
    (f"{GROUP}/{VERSION}", "AgentIdentity"): ("agentidentities", True),
    (f"{GROUP}/{VERSION}", "HookChain"): ("hookchains", True),
    (f"{GROUP}/{VERSION}", "PermissionRule"): ("permissionrules", True),
}
APPLY: Final = "application/apply-patch+yaml"


def path(api_version: str, kind: str, namespace: str | None, name: str | None = None,
         subresource: str | None = None) -> str:
    """The URL path of a collection, an object or a subresource."""
    plural, namespaced = RESOURCES[(api_version, kind)]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scope = f"/namespaces/{namespace}" if namespaced else ""
    tail = f"/{name}" if name else ""
    return f"{base}{scope}/{plural}{tail}{'/' + subresource if subresource else ''}"


def _object_path(obj: Object, subresource: str | None = None) -> str:
    meta = obj["metadata"]
    return path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"], subresource)


class Writer:
    """The operator's reads and writes (one instance, shared by all controllers)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def get(self, api_version: str, kind: str, namespace: str | None,
                  name: str) -> Object | None:
        """The object, or None when it does not exist."""
        try:
            return await self.api.request("GET", path(api_version, kind, namespace, name))
        except NotFoundError:
            return None

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: str) -> list[Object]:
        """Objects matching a label selector."""
        answer = await self.api.request("GET", path(api_version, kind, namespace),
                                        params={"labelSelector": selector})
        items: list[Object] = answer.get("items", [])
        return items

    async def apply(self, obj: Object, subresource: str | None = None) -> Object:
        """Server-side apply, taking ownership of the fields ``obj`` sets (force)."""
        API_WRITES.labels("apply", obj["kind"]).inc()
        return await self.api.request(
            "PATCH", _object_path(obj, subresource), body=obj, content_type=APPLY,
            params={"fieldManager": FIELD_MANAGER, "force": "true"})

    async def create(self, obj: Object) -> Object:
        """Create-only: :class:`ConflictError` when the object exists (never overwritten)."""
        meta = obj["metadata"]
        API_WRITES.labels("create", obj["kind"]).inc()
        return await self.api.request(
            "POST", path(obj["apiVersion"], obj["kind"], meta.get("namespace")), body=obj,
            params={"fieldManager": FIELD_MANAGER})

    async def replace(self, obj: Object) -> Object:
        """PUT with the read ``resourceVersion``: conflicts if it changed meanwhile."""
        API_WRITES.labels("replace", obj["kind"]).inc()
        return await self.api.request("PUT", _object_path(obj), body=obj,
                                      params={"fieldManager": FIELD_MANAGER})

    async def remove(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool:
        """Delete only if present: a pass that finds nothing to remove sends no write."""
        if await self.get(api_version, kind, namespace, name) is None:
            return False
        return await self.delete(api_version, kind, namespace, name)

    async def delete(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool:
        """Delete (background propagation); False when it was already gone."""
        API_WRITES.labels("delete", kind).inc()
        try:
            await self.api.request("DELETE", path(api_version, kind, namespace, name),
                                   params={"propagationPolicy": "Background"})
        except NotFoundError:
            return False
        return True
