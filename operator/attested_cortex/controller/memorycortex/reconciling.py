"""The MemoryCortex pass: parse, pause, gather, database, schema, server, status.

Also the clean-up of what owner references cannot remove: the cluster-scoped TokenReview
binding of a deleted cortex (deleted right away when the operator sees the cortex go, and
swept at start-up for cortexes deleted while it was down).
"""

from __future__ import annotations

from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.builders import services
from attested_cortex.builders.conditions import Observation, ready
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex, InvalidSpecError, parse_cortex, parse_meta
from attested_cortex.builders.rules import summary_line
from attested_cortex.controller.memorycortex import database, gathering, schema, server
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND = "MemoryCortex"
RBAC = "rbac.authorization.k8s.io/v1"
BACKENDS = {"AGE": "age", "CTE": "cte", "Auto": "cte"}  # Auto picks CTE: ADR 0003

Object = dict[str, Any]


async def cleanup_orphans(rt: Runtime) -> int:
    """Delete TokenReview bindings whose cortex no longer exists; how many went."""
    bindings = await rt.writer.list(RBAC, "ClusterRoleBinding", None,
                                    f"{n.MANAGED_BY_LABEL}={n.MANAGED_BY}")
    gone = 0
    for binding in bindings:
        labels = binding["metadata"].get("labels") or {}
        ns, name = labels.get(n.NAMESPACE_LABEL), labels.get(n.INSTANCE_LABEL)
        if ns and name and rt.views.get(KIND, ns, name) is None:
            gone += await rt.writer.delete(RBAC, "ClusterRoleBinding", None,
                                           binding["metadata"]["name"])
    return gone


def _fields(cortex: Cortex, satellites: Satellites, connection: str,
            version: int | None) -> Object:
    return {"schemaVersion": version, "kgBackend": BACKENDS[cortex.spec.graph.backend],
            "endpoint": services.endpoint(cortex), "connectionSecret": connection,
            "ruleSummary": [summary_line(r) for r in satellites.rules],
            "hookCount": len(satellites.hooks), "identities": len(satellites.identities)}


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a MemoryCortex; seconds until the next pass it wants, or None."""
    body = rt.views.get(KIND, key.namespace, key.name)
    if body is None:
        await rt.writer.remove(RBAC, "ClusterRoleBinding", None,
                               n.tokenreview_binding_name(key.namespace, key.name))
        return None
    status = body.get("status") or {}
    try:
        cortex = parse_cortex(body)
    except InvalidSpecError as exc:
        invalid = Observation.of("Ready", False, "InvalidSpec", str(exc))
        await write_status(rt.writer, kind=KIND, meta=parse_meta(body), current=status,
                           observed=[invalid])
        return None
    if cortex.spec.paused:
        await write_status(rt.writer, kind=KIND, meta=cortex.meta, current=status, observed=[
            Observation.of("Paused", True, "Paused", "spec.paused: nothing is changed")])
        return None
    satellites = gathering.gather(rt.views, cortex)
    db = await database.ensure(rt, cortex)
    migrated = await schema.ensure(rt, cortex, status,
                                   database_ready=db.condition.status == "True")
    served = await server.ensure(rt, cortex, satellites,
                                 schema_ready=migrated.condition.status == "True")
    parts = [db.condition, migrated.condition, served]
    paused = Observation.of("Paused", False, "Reconciling", "spec.paused is false")
    observed = [*parts, ready(parts, ready_reason="CortexReady",
                              ready_message="database, schema and server are ready")]
    if any(c.get("type") == "Paused" for c in status.get("conditions") or []):
        observed.append(paused)
    await write_status(rt.writer, kind=KIND, meta=cortex.meta, current=status,
                       observed=observed,
                       fields=_fields(cortex, satellites, db.connection_secret,
                                      migrated.version))
    return db.retry_in
