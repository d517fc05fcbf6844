"""DatabaseReady of a ``cloudNativePG`` cortex: its CloudNativePG Cluster, applied and read.

Called by :mod:`.reconciling` in place of :mod:`.database` when the spec asks for
CloudNativePG. One server-side apply of the Cluster (``builders/clusters.py``) per pass
with the operator's one field manager, so spec changes (instances, resources, parameters,
synchronous replicas) pass through, and what CloudNativePG's CRD or webhook refuses comes
back as ``ApiInvalidError``, reported as ``ApplyRefused`` with the API's words by the
registry's dispatch. The apply's answer carries the Cluster's status, mapped to our
condition by ``builders/clusterstates.py`` with no further read.

CloudNativePG not installed (the API server does not serve ``clusters.postgresql.cnpg.io``:
the apply is a 404) is ``CloudNativePGMissing``, with the command that installs it, looked
at again with a backoff read from the condition's age (:func:`missing_retry`: 5 s to 60 s,
one request each). Once installed the next pass creates the Cluster: no restart.

Cluster changes reach the operator through its watch when kopf serves it (ADR 0029:
CloudNativePG installed when the operator started, or an operator watching all namespaces,
whose kopf sees CRDs appear); otherwise the pass polls the Cluster (:data:`UNWATCHED_POLL_S`
while it is not healthy, :data:`UNWATCHED_HEALTHY_POLL_S` after).

The server and the migration Job read CloudNativePG's ``<cluster>-app`` Secret by reference
(``builders/podparts.py``): its ``uri`` names the ``<cluster>-rw`` Service, so they follow
the primary. The Secret is never read or copied by the operator.

A Cluster of the same name controlled by someone else is ``DatabaseReady=False``
(``NameCollision``, or ``WaitingForGarbageCollection`` while a deleted cortex's reference is
still on it, ADR 0028): without a watch the pass comes back to look, as nothing else would
wake it. So is a Cluster whose Services' names are taken (:func:`taken_service`): cortex
``a-db-rw``'s API Service is the name of cortex ``a``'s read-write Service, and CloudNativePG
would take over a Service of that name (its selector pointed at the database pods); the
Cluster is not created until the name is free, and the pass looks again every
:data:`UNWATCHED_POLL_S`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from attested_cortex.builders import clusters, clusterstates
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.applying import CollisionError, controller_of
from attested_cortex.controller.memorycortex.database import DatabaseOutcome
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiNotFoundError, KubeApi

#: CloudNativePG absent: look again after a quarter of the time it has been missing, within
#: these bounds (one request each time): soon after a person read the condition and
#: installed it, every minute for a cortex that has waited long.
MISSING_RETRY_S: Final = (5.0, 60.0)
#: Without a watch on Clusters: follow one that is not healthy this often...
UNWATCHED_POLL_S: Final = 10.0
#: ...and a healthy one this often (a failover is noticed within this bound).
UNWATCHED_HEALTHY_POLL_S: Final = 60.0
RELEASE: Final = "1.27.1"
INSTALL: Final = ("kubectl apply --server-side -f https://github.com/cloudnative-pg/"
                  f"cloudnative-pg/releases/download/v{RELEASE}/cnpg-{RELEASE}.yaml")


def missing_retry(missing_for_s: float) -> float:
    """Seconds until the next look for CloudNativePG, after ``missing_for_s`` without it."""
    low, high = MISSING_RETRY_S
    return min(high, max(low, missing_for_s / 4))


def _missing_for(status: Mapping[str, Any]) -> float:
    """Seconds DatabaseReady has said CloudNativePGMissing (0 when it does not yet)."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "DatabaseReady" and cond.get("reason") == "CloudNativePGMissing":
            since = datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
            return max(0.0, (datetime.now(UTC) - since).total_seconds())
    return 0.0


def missing(cortex: Cortex, status: Mapping[str, Any]) -> DatabaseOutcome:
    """CloudNativePG is not installed: say so, with the command that installs it."""
    message = (f"spec.database.cloudNativePG needs CloudNativePG, and this cluster does not "
               f"serve clusters.postgresql.cnpg.io; install it (version {RELEASE} is the one "
               f"tested) with: {INSTALL}; the cortex proceeds once it is installed, "
               "without restarting this operator")
    return DatabaseOutcome(Observation.of("DatabaseReady", False, "CloudNativePGMissing",
                                          message),
                           clusters.app_secret_name(cortex.meta.name),
                           retry_in=missing_retry(_missing_for(status)))


#: The Services CloudNativePG creates for a Cluster, by the suffix on the Cluster's name.
CLUSTER_SERVICES: Final = ("-rw", "-ro", "-r")


async def taken_service(rt: Runtime, cortex: Cortex) -> str | None:
    """Why the Cluster's Services cannot be CloudNativePG's (a Service of one of their
    names that the Cluster does not control: another cortex's, or anyone's), else None."""
    cluster = clusters.cluster_name(cortex.meta.name)
    for suffix in CLUSTER_SERVICES:
        live = await rt.writer.get("v1", "Service", cortex.meta.namespace, cluster + suffix)
        if live is None:
            continue
        owner = controller_of(live) or {}
        if (owner.get("kind"), owner.get("name")) != ("Cluster", cluster):
            by = f"{owner.get('kind')} {owner.get('name')}" if owner else "no controller"
            return (f"Service {cluster}{suffix} exists (controlled by {by}) and CloudNativePG "
                    f"would take it over as Cluster {cluster}'s: the Cluster is not created; "
                    "rename or delete one of them")
    return None


def _poll(rt: Runtime, state: clusterstates.ClusterState) -> float | None:
    if rt.watches_clusters:
        return None
    healthy = state.condition.reason == "ClusterHealthy"
    return UNWATCHED_HEALTHY_POLL_S if healthy else UNWATCHED_POLL_S


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any]) -> DatabaseOutcome:
    """Apply the Cluster; DatabaseReady and the primary from the status it answers with
    (``status``: the cortex's, for how long CloudNativePG has been missing)."""
    uid = await rt.namespace_uid(cortex.meta.namespace)
    if (taken := await taken_service(rt, cortex)) is not None:
        return DatabaseOutcome(Observation.of("DatabaseReady", False, "NameCollision", taken),
                               clusters.app_secret_name(cortex.meta.name),
                               retry_in=UNWATCHED_POLL_S)
    try:
        applied = await rt.writer.apply(clusters.build_cluster(cortex, rt.defaults,
                                                               namespace_uid=uid))
    except ApiNotFoundError:
        return missing(cortex, status)
    except CollisionError as exc:  # another owner's Cluster, or a deleted cortex's reference
        return DatabaseOutcome(Observation.of("DatabaseReady", False, exc.reason, str(exc)),
                               clusters.app_secret_name(cortex.meta.name),
                               retry_in=None if rt.watches_clusters else UNWATCHED_POLL_S)
    state = clusterstates.observe(applied, name=clusters.cluster_name(cortex.meta.name))
    return DatabaseOutcome(state.condition, clusters.app_secret_name(cortex.meta.name),
                           retry_in=_poll(rt, state), primary=state.primary, cluster=applied)


async def clusters_served(api: KubeApi) -> bool:
    """Whether the API server serves CloudNativePG's Clusters now (discovery, no RBAC):
    asked once at start-up, when kopf resolves what it watches."""
    try:
        answer = await api.request("GET", f"/apis/{clusters.API_VERSION}")
    except ApiNotFoundError:
        return False
    return any(r.get("name") == "clusters" for r in answer.get("resources") or [])
