"""Writes to the API server, all with one field manager: server-side apply, create-only,
replace-if-unchanged and delete; plus the reads a reconcile needs.

:class:`Writer` is the interface every controller is handed (through
:class:`~attested_cortex.controller.runtime.Runtime`); :class:`ApiWriter` is the one that
talks to the API server. The fast reconciler tests hand the controllers an in-memory
``Writer`` instead (tests/support/memorycluster.py), held to the same semantics by
tests/operator/test_writer_agreement.py (ADR 0027).

Errors stay in the :mod:`attested_cortex.kubeclient` tree; the registry's dispatch sorts
them: an object the API server refuses (:class:`~attested_cortex.kubeclient.ApiInvalidError`) is
permanent (reported as ``ApplyRefused``, retried only when the spec changes); everything
else is temporary (the work queue retries with capped backoff, the last error in ``Ready``).

An object is never adopted or patched while another owner controls it: an apply of a child
(an object with a controller reference) reads the live object first and raises
:class:`CollisionError` when its controller is someone else (reported as ``NameCollision``,
or ``WaitingForGarbageCollection`` when it is a deleted predecessor of the same name).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Final, Protocol

from attested_cortex.builders.names import FIELD_MANAGER
from attested_cortex.controller.metrics import API_WRITES
from attested_cortex.crd import KINDS
from attested_cortex.kubeclient import ApiNotFoundError, KubeApi

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
    ("batch/v1", "CronJob"): ("cronjobs", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("postgresql.cnpg.io/v1", "Cluster"): ("clusters", True),
    ("cert-manager.io/v1", "Certificate"): ("certificates", True),
    ("postgresql.cnpg.io/v1", "ScheduledBackup"): ("scheduledbackups", True),
    ("postgresql.cnpg.io/v1", "Backup"): ("backups", True),
    # The custom resources, from the one list of them (crd/kinds.py).
    **{(kind.api_version, kind.kind): (kind.plural, True) for kind in KINDS},
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


async def together(*steps: Awaitable[Any]) -> list[Any]:
    """Run independent steps concurrently and wait for all of them; then raise the first
    failure, so no step is left running unobserved behind an early error."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


class CollisionError(RuntimeError):
    """A child's name is held by an object another owner controls: left alone."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def controller_of(obj: Object) -> Object | None:
    """The controller owner reference of an object, if any."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def check_controller(live: Object, mine: Object) -> None:
    """Raise :class:`CollisionError` unless ``live`` is uncontrolled or controlled by
    ``mine`` (an owner reference: kind, name, uid)."""
    theirs = controller_of(live)
    if theirs is None or theirs.get("uid") == mine.get("uid"):
        return
    what = f"{live.get('kind', 'object')} {live['metadata']['name']}"
    if (theirs.get("kind"), theirs.get("name")) == (mine.get("kind"), mine.get("name")):
        raise CollisionError(f"{what} still belongs to an earlier {theirs['kind']} "
                             f"{theirs['name']} (uid {theirs.get('uid')}); waiting for its "
                             "garbage collection", reason="WaitingForGarbageCollection")
    raise CollisionError(f"{what} is controlled by {theirs.get('kind')} {theirs.get('name')}, "
                         f"not by {mine.get('kind')} {mine.get('name')}: not adopted, not "
                         "changed; rename or delete one of them", reason="NameCollision")


async def check_child(writer: Writer, obj: Object, subresource: str | None) -> None:
    """Before an apply of a child (an object with a controller reference): raise
    :class:`CollisionError` when its live object is controlled by someone else. Every
    :class:`Writer` calls this, so the in-memory one refuses exactly what this one does."""
    mine = controller_of(obj) if subresource is None else None
    if mine is None:
        return
    meta = obj["metadata"]
    live = await writer.get(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
    if live is not None:
        check_controller(live, mine)


class Writer(Protocol):
    """The reads and writes a reconcile makes, all as the operator's one field manager.

    ``get`` answers None for a missing object; ``apply`` is server-side apply with force
    (``subresource="status"`` writes the status only; a main-resource apply never touches
    it) and raises :class:`CollisionError` for a child another owner controls; ``create``
    raises :class:`~attested_cortex.kubeclient.ApiConflictError` when the name is taken;
    ``replace`` the same when ``resourceVersion`` is stale; ``remove`` sends nothing when
    the object is already gone; ``delete`` answers False then.
    """

    async def get(self, api_version: str, kind: str, namespace: str | None,
                  name: str) -> Object | None: ...

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: str) -> list[Object]: ...

    async def apply(self, obj: Object, subresource: str | None = None) -> Object: ...

    async def create(self, obj: Object) -> Object: ...

    async def replace(self, obj: Object) -> Object: ...

    async def remove(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool: ...

    async def delete(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool: ...

    async def proxy_get(self, namespace: str, pod: str, scheme: str, port: int,
                        path: str) -> str: ...


class ApiWriter:
    """The operator's reads and writes on the API server (one instance, shared by all
    controllers)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def get(self, api_version: str, kind: str, namespace: str | None,
                  name: str) -> Object | None:
        """The object, or None when it does not exist."""
        try:
            return await self.api.request("GET", path(api_version, kind, namespace, name))
        except ApiNotFoundError:
            return None

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: str) -> list[Object]:
        """Objects matching a label selector."""
        answer = await self.api.request("GET", path(api_version, kind, namespace),
                                        params={"labelSelector": selector})
        items: list[Object] = answer.get("items", [])
        return items

    async def apply(self, obj: Object, subresource: str | None = None) -> Object:
        """Server-side apply, taking ownership of the fields ``obj`` sets (force); a child
        whose live object another owner controls is left alone (:class:`CollisionError`)."""
        await check_child(self, obj, subresource)
        API_WRITES.labels("apply", obj["kind"]).inc()
        return await self.api.request(
            "PATCH", _object_path(obj, subresource), body=obj, content_type=APPLY,
            params={"fieldManager": FIELD_MANAGER, "force": "true"})

    async def create(self, obj: Object) -> Object:
        """Create-only: :class:`ApiConflictError` when the object exists (never overwritten)."""
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
        except ApiNotFoundError:
            return False
        return True

    async def proxy_get(self, namespace: str, pod: str, scheme: str, port: int,
                        path: str) -> str:
        """A GET on a pod's port through the API server's proxy (RBAC ``pods/proxy`` get),
        the answer's text: a read, never counted as a write."""
        return await self.api.request_text(
            "GET", f"/api/v1/namespaces/{namespace}/pods/{scheme}:{pod}:{port}/proxy{path}")
