"""An in-memory cluster behind the operator's own seam (controller/runtime.py): a
:class:`~attested_cortex.controller.applying.Writer` and the watched views, both over one
store, so a reconciler runs in milliseconds (tests/controller_fast).

It fakes *our* interfaces, not Kubernetes: only what the reconcilers rely on, with the API
server's semantics, held to the real writer by tests/operator/test_writer_agreement.py:

* server-side apply by field manager (force): a manager's apply sets what it names; a field
  it applied before and names no more is removed unless another manager owns it; maps
  merge, lists are replaced whole (our CRDs' lists are atomic);
* the status subresource: a main-resource write never changes ``status``, a status write
  changes nothing else and answers NotFound for a missing object;
* ``metadata.generation`` counts changes outside metadata and status; ``resourceVersion``
  changes with every write that changes something, and only then;
* create answers Conflict for a taken name, replace for a stale ``resourceVersion``;
  NotFound on replace and delete of a missing object;
* Events are objects like any other (:meth:`MemoryCluster.events`).

Not simulated: admission, schema validation, defaulting and pruning (the passes parse
every body with the CRD models, which fill the same defaults), garbage collection by owner
reference,
watch latency (the views always show the store), and the controllers of built-in kinds: a
test sets a child's status itself (:meth:`MemoryCluster.set_status`), as the
kube-controller-manager or the kubelet would.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from attested_cortex.builders.names import FIELD_MANAGER
from attested_cortex.controller.applying import check_child
from attested_cortex.controller.runtime import Views
from attested_cortex.crd import KINDS
from attested_cortex.kubeclient import ApiConflictError, ApiNotFoundError

Object = dict[str, Any]
Objects = list[Object]  # (the classes below have a method called list)
Calls = list[tuple[str, str, str]]
Path = tuple[str, ...]
StoreKey = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" when cluster-wide), name
Owner = tuple[str, str, str]  # manager, operation (Apply/Update), subresource ("" or status)
#: Creation times count up from here, a second per object, so "who came first" is decided.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: Set by the API server, owned by nobody.
SERVER_FIELDS = frozenset({("apiVersion",), ("kind",), ("metadata", "name"),
                           ("metadata", "namespace"), ("metadata", "uid"),
                           ("metadata", "resourceVersion"), ("metadata", "generation"),
                           ("metadata", "creationTimestamp")})


def leaves(obj: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    """The paths a manager owns by setting ``obj``: every non-map value and empty map."""
    out: set[Path] = set()
    for key, value in obj.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and value:
            out |= leaves(value, path)
        elif path not in SERVER_FIELDS:
            out.add(path)
    return out


def _merge(into: Object, config: Mapping[str, Any]) -> None:
    for key, value in config.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _drop(obj: Object, path: Path) -> None:
    """Remove ``path`` and the maps it leaves empty."""
    parent = obj
    for key in path[:-1]:
        inner = parent.get(key)
        if not isinstance(inner, dict):
            return
        parent = inner
    parent.pop(path[-1], None)
    if len(path) > 1 and not parent:
        _drop(obj, path[:-1])


def _split(obj: Mapping[str, Any], subresource: str) -> Object:
    """What a write to ``subresource`` may change: the status only, or all but it."""
    if subresource == "status":
        return {"status": copy.deepcopy(obj.get("status") or {})}
    return {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}


def _meaning(obj: Mapping[str, Any]) -> Object:
    """What counts for ``generation``: everything outside metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _matches(obj: Mapping[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    wanted = [term.split("=", 1) for term in selector.split(",") if term]
    return all(labels.get(k) == v for k, v in wanted)


@dataclass
class Stored:
    obj: Object
    owners: dict[Owner, set[Path]] = field(default_factory=dict)


@dataclass
class MemoryCluster:
    """The store: objects, who owns which of their fields, and a count of changes."""

    objects: dict[StoreKey, Stored] = field(default_factory=dict)
    versions: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    changes: int = 0

    @staticmethod
    def key_of(obj: Mapping[str, Any]) -> StoreKey:
        meta = obj["metadata"]
        return obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"]

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Object | None:
        stored = self.objects.get((api_version, kind, namespace or "", name))
        return copy.deepcopy(stored.obj) if stored is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None,
             selector: str = "") -> list[Object]:
        return [copy.deepcopy(s.obj) for (v, k, ns, _), s in sorted(self.objects.items())
                if (v, k) == (api_version, kind) and (namespace is None or ns == namespace)
                and _matches(s.obj, selector)]

    def _commit(self, key: StoreKey, stored: Stored, before: Stored | None) -> Object:
        obj = stored.obj
        if before is not None and (obj, stored.owners) == (before.obj, before.owners):
            return copy.deepcopy(obj)  # nothing changed: no write, no new resourceVersion
        meta = obj["metadata"]
        if before is not None and _meaning(obj) != _meaning(before.obj):
            meta["generation"] = int(meta.get("generation") or 1) + 1
        meta["resourceVersion"] = str(next(self.versions))
        self.objects[key] = stored
        self.changes += 1
        return copy.deepcopy(obj)

    def _new(self, obj: Mapping[str, Any]) -> Stored:
        meta = obj["metadata"]
        number = next(self.versions)
        body: Object = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {
            "name": meta["name"], "uid": f"uid-{number}", "generation": 1,
            "creationTimestamp": (EPOCH + timedelta(seconds=number)).strftime(
                "%Y-%m-%dT%H:%M:%SZ")}}
        if meta.get("namespace"):
            body["metadata"]["namespace"] = meta["namespace"]
        return Stored(body)

    def apply(self, obj: Object, *, manager: str, subresource: str = "") -> Object:
        """Server-side apply with force, as ``manager``."""
        key = self.key_of(obj)
        found = self.objects.get(key)
        if found is None and subresource:
            raise ApiNotFoundError(404, f"{obj['kind']} {key[3]} not found")
        stored = copy.deepcopy(found) if found is not None else self._new(obj)
        config = _split(obj, subresource)
        wanted = leaves(config)
        me: Owner = (manager, "Apply", subresource)
        for path in stored.owners.get(me, set()) - wanted:
            if not any(path in paths for who, paths in stored.owners.items() if who != me):
                _drop(stored.obj, path)
        for who, paths in stored.owners.items():
            if who != me:
                paths -= wanted
        _merge(stored.obj, config)
        stored.owners[me] = wanted
        return self._commit(key, stored, found)

    def create(self, obj: Object, *, manager: str) -> Object:
        key = self.key_of(obj)
        if key in self.objects:
            raise ApiConflictError(409, f"{obj['kind']} {key[3]} already exists")
        stored = self._new(obj)
        config = _split(obj, "")
        _merge(stored.obj, config)
        stored.owners[(manager, "Update", "")] = leaves(config)
        return self._commit(key, stored, None)

    def replace(self, obj: Object, *, manager: str) -> Object:
        key = self.key_of(obj)
        found = self.objects.get(key)
        if found is None:
            raise ApiNotFoundError(404, f"{obj['kind']} {key[3]} not found")
        version = obj["metadata"].get("resourceVersion")
        if version and version != found.obj["metadata"]["resourceVersion"]:
            raise ApiConflictError(409, f"{obj['kind']} {key[3]}: the object has been modified")
        stored = copy.deepcopy(found)
        server = {k: v for k, v in found.obj["metadata"].items() if (("metadata", k)
                                                                    in SERVER_FIELDS)}
        config = _split(obj, "")
        config["metadata"] = {**config.get("metadata", {}), **server}
        stored.obj = {**config, **({"status": found.obj["status"]} if "status" in found.obj
                                   else {})}
        now = leaves(config)
        changed = {p for p in now if _at(stored.obj, p) != _at(found.obj, p)}
        for paths in stored.owners.values():
            paths &= now
            paths -= changed
        stored.owners.setdefault((manager, "Update", ""), set()).update(changed)
        return self._commit(key, stored, found)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        if self.objects.pop((api_version, kind, namespace or "", name), None) is None:
            raise ApiNotFoundError(404, f"{kind} {name} not found")
        self.changes += 1

    # What tests do as users and as Kubernetes' own controllers.

    def set_status(self, api_version: str, kind: str, namespace: str, name: str,
                   status: Object, *, manager: str = "kube-controller-manager") -> Object:
        """A child's status, as the controller of its kind would write it."""
        return self.apply({"apiVersion": api_version, "kind": kind, "metadata": {
            "name": name, "namespace": namespace}, "status": status}, manager=manager,
            subresource="status")

    def events(self, kind: str, name: str, namespace: str = "") -> Objects:
        """Events about one object, oldest first."""
        about = [e for e in self.list("v1", "Event", namespace or None)
                 if (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == (kind, name)]
        return sorted(about, key=lambda e: int(e["metadata"]["resourceVersion"]))


def _at(obj: Mapping[str, Any], path: Path) -> object:
    value: object = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


@dataclass
class MemoryWriter:
    """:class:`~attested_cortex.controller.applying.Writer` over a :class:`MemoryCluster`,
    as one field manager; ``calls`` records every write it was asked for."""

    cluster: MemoryCluster
    manager: str = FIELD_MANAGER
    calls: Calls = field(default_factory=list)

    async def get(self, api_version: str, kind: str, namespace: str | None,
                  name: str) -> Object | None:
        return self.cluster.get(api_version, kind, namespace, name)

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: str) -> list[Object]:
        return self.cluster.list(api_version, kind, namespace, selector)

    async def apply(self, obj: Object, subresource: str | None = None) -> Object:
        await check_child(self, obj, subresource)
        self.calls.append(("apply", obj["kind"], subresource or ""))
        return self.cluster.apply(obj, manager=self.manager, subresource=subresource or "")

    async def create(self, obj: Object) -> Object:
        self.calls.append(("create", obj["kind"], ""))
        return self.cluster.create(obj, manager=self.manager)

    async def replace(self, obj: Object) -> Object:
        self.calls.append(("replace", obj["kind"], ""))
        return self.cluster.replace(obj, manager=self.manager)

    async def remove(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool:
        if await self.get(api_version, kind, namespace, name) is None:
            return False
        return await self.delete(api_version, kind, namespace, name)

    async def delete(self, api_version: str, kind: str, namespace: str | None,
                     name: str) -> bool:
        self.calls.append(("delete", kind, ""))
        try:
            self.cluster.delete(api_version, kind, namespace, name)
        except ApiNotFoundError:
            return False
        return True

    async def proxy_get(self, namespace: str, pod: str, scheme: str, port: int,
                        path: str) -> str:
        """No pod runs here: each proxied read answers 404, as for a pod that is gone."""
        raise ApiNotFoundError(404, f"pods {pod} not found ({scheme}:{port}{path})")


@dataclass(frozen=True)
class Index(Mapping[tuple[str, str], Iterable[Object]]):
    """One of kopf's indices, read from the store on every lookup: by name, by the cortex a
    satellite names, or (Secrets) names only, never data."""

    cluster: MemoryCluster
    api_version: str
    kind: str
    by: str = "name"

    def _entries(self) -> dict[tuple[str, str], list[Object]]:
        out: dict[tuple[str, str], list[Object]] = {}
        for obj in self.cluster.list(self.api_version, self.kind, None):
            meta = obj["metadata"]
            if self.by == "cortex":
                key = (meta["namespace"], str(obj["spec"].get("cortexRef", {}).get("name", "")))
            else:
                key = (meta["namespace"], meta["name"])
            if self.kind == "Secret":
                obj = {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
            out.setdefault(key, []).append(obj)
        return out

    def __getitem__(self, key: tuple[str, str]) -> list[Object]:
        return self._entries()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())


def views_of(cluster: MemoryCluster) -> Views:
    """The views the registry binds from kopf's indices, over the store instead."""
    by_name: dict[str, Mapping[tuple[str, str], Iterable[Object]]] = {
        kind.kind: Index(cluster, kind.api_version, kind.kind) for kind in KINDS}
    by_name["Secret"] = Index(cluster, "v1", "Secret")
    by_cortex: dict[str, Mapping[tuple[str, str], Iterable[Object]]] = {
        kind.kind: Index(cluster, kind.api_version, kind.kind, by="cortex")
        for kind in KINDS if kind.satellite}
    return Views(by_name=by_name, by_cortex=by_cortex)
