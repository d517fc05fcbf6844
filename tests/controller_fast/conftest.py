"""The operator's reconcilers on an in-memory cluster: each test is a few passes in
milliseconds (issue 22, item 3). tests/operator keeps the truth on a real control plane;
these check a reconciler change in seconds.

``op`` is the operator's :class:`~attested_cortex.controller.runtime.Runtime` over a
:class:`~tests.support.memorycluster.MemoryCluster` (our own Writer and Views, held to the
real writer by tests/operator/test_writer_agreement.py), with the user's side (``apply`` as
kubectl) and Kubernetes' side (``set_status`` as its controllers) beside it. A pass runs
through the registry's dispatch, as the work queue runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import Defaults
from attested_cortex.controller.eventing import now
from attested_cortex.controller.queueing import Key, WorkQueue
from attested_cortex.controller.registry import dispatch
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.versions import newest_schema_version
from attested_cortex.crd import GROUP, VERSION
from tests.support.memorycluster import MemoryCluster, MemoryWriter, views_of

NS = "ns"
API = f"{GROUP}/{VERSION}"
Object = dict[str, Any]


async def _never(_: Key) -> None:
    raise AssertionError("the fast tests run passes themselves; the queue has no workers")


@dataclass
class Operated:
    """One namespace, the operator's runtime over the store, and the user's hands."""

    cluster: MemoryCluster
    writer: MemoryWriter
    rt: Runtime

    async def reconcile(self, kind: str, name: str) -> float | None:
        """One pass, dispatched as the work queue does; seconds until it wants another."""
        return await dispatch(self.rt, Key(kind, NS, name))

    def apply(self, *objects: Object) -> None:
        """``kubectl apply --server-side`` of each object into the namespace."""
        for obj in objects:
            obj["metadata"].setdefault("namespace", NS)
            self.cluster.apply(obj, manager="kubectl")

    def get(self, kind: str, name: str, api_version: str = API) -> Object | None:
        return self.cluster.get(api_version, kind, NS, name)

    def status(self, kind: str, name: str) -> Object:
        return dict((self.get(kind, name) or {}).get("status") or {})

    def condition(self, kind: str, name: str, type_: str) -> Object:
        found = [c for c in self.status(kind, name).get("conditions") or []
                 if c["type"] == type_]
        assert found, f"{kind}/{name} has no {type_} condition: {self.status(kind, name)}"
        return dict(found[0])

    def reasons(self, kind: str, name: str) -> dict[str, tuple[str, str]]:
        """Condition type -> (status, reason), what ``kubectl describe`` leads with."""
        return {c["type"]: (c["status"], c["reason"])
                for c in self.status(kind, name).get("conditions") or []}

    def events(self, kind: str, name: str) -> list[tuple[str, str]]:
        """(type, reason) of the events about one object, oldest first."""
        return [(e["type"], e["reason"]) for e in self.cluster.events(kind, name, NS)]

    def set_status(self, api_version: str, kind: str, name: str, status: Object) -> None:
        self.cluster.set_status(api_version, kind, NS, name, status)

    def writes(self) -> int:
        """Writes the operator asked for so far (applies, creates, replaces, deletes)."""
        return len(self.writer.calls)


@pytest.fixture
def op() -> Iterator[Operated]:
    cluster = MemoryCluster()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                  manager="kubectl")
    writer = MemoryWriter(cluster)
    defaults = Defaults(server_image="attested-cortex/cortex:test",
                        postgres_image="attested-cortex/postgres-age:test",
                        schema_version=newest_schema_version())
    rt = Runtime(writer=writer, queue=WorkQueue(_never, workers=0), views=views_of(cluster),
                 defaults=defaults)
    yield Operated(cluster=cluster, writer=writer, rt=rt)


def cortex(name: str, **spec: Any) -> Object:
    """A MemoryCortex with a managed database unless ``database`` is given."""
    return {"apiVersion": API, "kind": "MemoryCortex", "metadata": {"name": name},
            "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}}, **spec}}


def satellite(kind: str, name: str, cortex_name: str, **spec: Any) -> Object:
    """An AgentIdentity, HookChain or PermissionRule naming ``cortex_name``."""
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name},
            "spec": {"cortexRef": {"name": cortex_name}, **spec}}


def rule(name: str, cortex_name: str = "mem", **spec: Any) -> Object:
    return satellite("PermissionRule", name, cortex_name, **{
        "namespace": "team/**", "agents": ["*"], "operations": ["recall"],
        "decision": "Allow", **spec})


def daemon_hook(name: str) -> Object:
    """A hook served by a sidecar of every server pod (so it changes the pod template)."""
    return {"name": name, "events": ["post_store"], "mode": "Daemon", "timeoutMs": 500,
            "sidecar": {"image": "attested-cortex/cortex:test",
                        "command": ["cortexctl", "hookd", "--listen", "unix:///x.sock"]}}


def exec_hook(name: str, **fields: Any) -> Object:
    return {"name": name, "events": ["pre_store"], "mode": "Exec",
            "command": ["python3", "-m", "attested_cortex.hooks.reference.redact"], **fields}


def database_runs(op: Operated, cortex_name: str = "mem") -> None:
    """The database pod is ready, as the StatefulSet controller reports it."""
    op.set_status("apps/v1", "StatefulSet", n.db_name(cortex_name), {"readyReplicas": 1})


def job_finished(op: Operated, job: str, outcome: str = "Complete", message: str = "") -> None:
    """A migration Job's end, as the Job controller reports it."""
    op.set_status("batch/v1", "Job", job, {"conditions": [{
        "type": outcome, "status": "True", "reason": outcome, "message": message,
        "lastTransitionTime": now()}]})


def server_rolled(op: Operated, cortex_name: str = "mem") -> None:
    """Every server pod of the current template is available."""
    name = n.server_name(cortex_name)
    deployment = op.get("Deployment", name, "apps/v1") or {}
    replicas = deployment["spec"]["replicas"]
    op.set_status("apps/v1", "Deployment", name, {
        "observedGeneration": deployment["metadata"]["generation"], "replicas": replicas,
        "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas})
