"""The MemoryCortex pass: parse, pause, gather, database (with the server's configuration
and its TLS certificate), backup, schema, import of a logical restore, verification of a
restore, server, logical backup, the operator-run witnesses, status.

Also the clean-up of what owner references cannot remove: the cluster-scoped TokenReview
binding of a deleted cortex (deleted right away when the operator sees the cortex go, and
swept at start-up for cortexes deleted while it was down).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex, InvalidSpecError, parse_cortex, parse_meta
from attested_cortex.builders.verification import Verdict
from attested_cortex.controller.applying import together
from attested_cortex.controller.memorycortex import (
    backup,
    cloudnativepg,
    database,
    gathering,
    logicalbackup,
    readiness,
    restoring,
    schema,
    server,
    tls,
    verification,
    witnesses,
)
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND = "MemoryCortex"
RBAC = "rbac.authorization.k8s.io/v1"

Object = dict[str, Any]


async def cleanup_orphans(rt: Runtime, watched: frozenset[str] | None = None) -> int:
    """Delete TokenReview bindings whose cortex no longer exists; how many went.

    Only bindings of the namespaces this operator watches (``watched``; None: all): another
    operator's cortexes are absent from this one's views, and their bindings are not orphans.
    """
    bindings = await rt.writer.list(RBAC, "ClusterRoleBinding", None,
                                    f"{n.MANAGED_BY_LABEL}={n.MANAGED_BY}")
    gone = 0
    for binding in bindings:
        labels = binding["metadata"].get("labels") or {}
        ns, name = labels.get(n.NAMESPACE_LABEL), labels.get(n.INSTANCE_LABEL)
        mine = watched is None or any(fnmatchcase(ns or "", w) for w in watched)
        if ns and name and mine and rt.views.get(KIND, ns, name) is None:
            gone += await rt.writer.delete(RBAC, "ClusterRoleBinding", None,
                                           binding["metadata"]["name"])
    return gone


async def _verified(rt: Runtime, cortex: Cortex, status: Object, *,
                    schema_ready: bool) -> tuple[Verdict | None, float | None]:
    """The import of a logical restore, then the verification of any restore: the
    import's verdict stands while it is not done; its record joins ``status.restore``."""
    imported = await restoring.ensure(rt, cortex, status, schema_ready=schema_ready)
    verdict: Verdict | None
    if imported.verdict is not None:
        verdict, retry_in = imported.verdict, imported.retry_in
    else:
        verdict, retry_in = await verification.ensure(
            rt, cortex, status, schema_ready=schema_ready and imported.done)
    if verdict is not None and imported.record is not None:
        verdict = Verdict(verdict.condition, {**imported.record, **(verdict.restore or {})})
    return verdict, retry_in


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
    ensured = (cloudnativepg.ensure(rt, cortex, status)
               if cortex.spec.database.cloud_native_pg is not None else database.ensure(rt, cortex))
    db: database.DatabaseOutcome
    certificate: tls.TlsOutcome
    db, _, certificate = await together(ensured, server.prepare(rt, cortex, satellites),
                                        tls.ensure(rt, cortex))
    backed = await backup.ensure(rt, cortex, status, db)
    migrated = await schema.ensure(rt, cortex, status,
                                   database_ready=db.condition.status == "True")
    schema_ready = migrated.condition.status == "True"
    verdict, verify_in = await _verified(rt, cortex, status, schema_ready=schema_ready)
    served = await server.ensure(rt, cortex, satellites, schema_ready=schema_ready and (
        verdict is None or verdict.verified), blocked=certificate.problem)
    backed_up = await logicalbackup.ensure(rt, cortex, status)
    witnessed = await witnesses.ensure(rt, cortex, status)
    await readiness.report(rt, cortex, status, satellites, db=db, schema=migrated,
                           server=served.condition, backup=backed, verdict=verdict,
                           logical_backup=backed_up, witnessed=witnessed)
    delays = [d for d in (db.retry_in, backed.retry_in, migrated.retry_in, verify_in,
                          served.retry_in, certificate.retry_in,
                          witnessed.retry_in) if d is not None]
    return min(delays, default=None)
