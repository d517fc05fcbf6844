"""DatabaseReady of a ``cloudNativePG`` cortex, read from its Cluster's own status. Pure.

CloudNativePG reports a Cluster through ``status.conditions`` (``Ready``, with
observedGeneration), ``phase``/``phaseReason`` (free text such as "Cluster in healthy
state" or "Failing over"), ``currentPrimary``/``targetPrimary`` (pod names: they differ
while a failover or switchover moves the primary), ``instances``/``readyInstances`` and
``instancesStatus`` (``healthy`` -> pod names). :func:`observe` turns that into our
condition with a chain of checks evaluated in order, the first that matches deciding
(cert-manager's policy chains): the status is True exactly while a primary takes writes,
so a replica being rebuilt or a parameter being rolled out reads ``ClusterDegraded``, not
an outage, and a moving primary reads ``PrimaryChanging``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.builders.conditions import Observation

Object = Mapping[str, Any]
TYPE: Final = "DatabaseReady"
HEALTHY_PHASE: Final = "Cluster in healthy state"
#: Phases that do not end without someone acting (CloudNativePG's api/v1/cluster_types.go).
FAILED_PHASES: Final = frozenset({
    "Cluster is unrecoverable and needs manual intervention",
    "Waiting for user action",
    "Cluster has incomplete or invalid image catalog",
    "Unable to create required cluster objects",
    "Cluster cannot proceed to reconciliation due to an unknown plugin being required",
    "Cluster cannot proceed to reconciliation due to an error while interacting with plugins",
    "Cluster cannot execute instance online upgrade due to missing architecture binary",
})


@dataclass(frozen=True)
class ClusterState:
    """What the pass needs of a Cluster: the condition and the primary's pod."""

    condition: Observation
    primary: str | None


@dataclass(frozen=True)
class _Facts:
    name: str
    generation: int
    status: Object

    def text(self, key: str) -> str:
        return str(self.status.get(key) or "")

    def count(self, key: str) -> int:
        return int(self.status.get(key) or 0)

    def ready_condition(self) -> Object:
        conditions = self.status.get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Ready"), {})

    def instances(self) -> str:
        return f"{self.count('readyInstances')}/{self.count('instances')} instances ready"


Check = Callable[[_Facts], Observation | None]


def _failed(facts: _Facts) -> Observation | None:
    if facts.text("phase") not in FAILED_PHASES:
        return None
    why = facts.text("phaseReason")
    return Observation.of(TYPE, False, "ClusterFailed",
                          f"Cluster {facts.name}: {facts.text('phase')}"
                          + (f" ({why})" if why else ""))


def _no_primary(facts: _Facts) -> Observation | None:
    if facts.text("currentPrimary"):
        return None
    phase = facts.text("phase") or "not started by CloudNativePG yet"
    return Observation.of(TYPE, False, "ClusterCreating",
                          f"Cluster {facts.name} has no primary yet: {phase}; "
                          f"{facts.instances()}")


def _moving(facts: _Facts) -> Observation | None:
    current, target = facts.text("currentPrimary"), facts.text("targetPrimary")
    if not target or target == current:
        return None
    return Observation.of(TYPE, False, "PrimaryChanging",
                          f"Cluster {facts.name}: the primary moves from {current} to "
                          f"{target} ({facts.text('phase') or 'failover'}); writes wait")


def _primary_down(facts: _Facts) -> Observation | None:
    healthy = (facts.status.get("instancesStatus") or {}).get("healthy")
    if healthy is None or facts.text("currentPrimary") in healthy:
        return None
    return Observation.of(TYPE, False, "PrimaryNotReady",
                          f"Cluster {facts.name}: primary {facts.text('currentPrimary')} is "
                          f"not healthy; {facts.instances()}")


def _healthy(facts: _Facts) -> Observation | None:
    ready = facts.ready_condition()
    seen = ready.get("observedGeneration")
    current = seen is None or int(seen) >= facts.generation
    if ready.get("status") != "True" or facts.text("phase") != HEALTHY_PHASE or not current:
        return None
    return Observation.of(TYPE, True, "ClusterHealthy",
                          f"Cluster {facts.name}: primary {facts.text('currentPrimary')}, "
                          f"{facts.instances()}")


def _degraded(facts: _Facts) -> Observation:
    phase = facts.text("phase") or "no phase"
    return Observation.of(TYPE, True, "ClusterDegraded",
                          f"Cluster {facts.name}: primary {facts.text('currentPrimary')} takes "
                          f"writes; {facts.instances()}; CloudNativePG: {phase}")


CHECKS: Final[tuple[Check, ...]] = (_failed, _no_primary, _moving, _primary_down, _healthy)


def observe(cluster: Object | None, *, name: str) -> ClusterState:
    """DatabaseReady and the primary from a Cluster (None: not created yet)."""
    if cluster is None:
        return ClusterState(Observation.of(TYPE, False, "ClusterCreating",
                                           f"Cluster {name} is being created"), None)
    meta = cluster.get("metadata") or {}
    facts = _Facts(name=name, generation=int(meta.get("generation") or 0),
                   status=cluster.get("status") or {})
    decided = next((o for o in (check(facts) for check in CHECKS) if o is not None), None)
    return ClusterState(decided or _degraded(facts), facts.text("currentPrimary") or None)
