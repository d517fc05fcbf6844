"""A HookChain's ``InForce``: whether a serving pod of the cortex's current template runs
its hooks. Pure; called by controller/hookchain.

Accepted is not in force: a chain whose sidecar image does not exist (or whose sidecar exits)
was valid, so it was rendered, but no serving pod ran it while the HookChain said
``HooksInForce`` (found on the real node). A Daemon hook is in force once the server
Deployment's template carries its sidecar and the rollout of that template is complete; an
Exec hook runs inside the server container, which re-reads the hook file, so it is in force
once any server pod is available. Otherwise ``NotRunning``, in the cortex's own words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.rollout import is_complete
from attested_cortex.builders.sidecars import container_name
from attested_cortex.crd.hookchain import Hook

Object = dict[str, Any]
TYPE: Final = "InForce"


def _containers(deployment: Object) -> set[str]:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return {str(c.get("name")) for c in spec.get("containers") or []}


def _not_running(why: str, server_ready: Mapping[str, Any] | None) -> Observation:
    words = (server_ready or {}).get("message")
    said = f"{why}; the cortex says: {words}" if words else why
    return Observation.of(TYPE, False, "NotRunning", said[:1024])


def in_force(hooks: Sequence[Hook], deployment: Object | None,
             server_ready: Mapping[str, Any] | None) -> Observation:
    """InForce of a chain's ``hooks`` from the cortex's server Deployment and its ServerReady."""
    if deployment is None:
        return _not_running("the cortex has no server yet", server_ready)
    daemons = sorted(h.name for h in hooks if h.mode == "Daemon")
    absent = [h for h in daemons if container_name(h) not in _containers(deployment)]
    if absent:
        return _not_running(f"the server template does not carry hook {', '.join(absent)} yet",
                            server_ready)
    replicas = int((deployment.get("spec") or {}).get("replicas") or 0)
    available = int((deployment.get("status") or {}).get("availableReplicas") or 0)
    if replicas == 0 or available == 0:
        return _not_running("no server pod is available", server_ready)
    if daemons and not is_complete(deployment, replicas):
        return _not_running(f"hook {', '.join(daemons)} runs in no serving pod of the current "
                            "template yet", server_ready)
    return Observation.of(TYPE, True, "Running",
                          f"{len(hooks)} hooks run in {available} serving server pods")
