"""ServerReady from the server Deployment and, while it is not ready, its pods. Pure.

Ready means what ``kubectl rollout status`` means: every replica runs the current template
and is available, and no pod of an older template is left. Counting available pods alone
called a rollout done while the old pod still served and the new one crash-looped (found
on the real node with a sidecar that exits). While a rollout is incomplete the message
names the first container that cannot run (crash loop, image pull, bad configuration) so
``kubectl get mcx`` says why, and a Deployment past its progress deadline is ``RolloutStuck``.
Called by controller/memorycortex/server.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from attested_cortex.builders.conditions import Observation

Object = dict[str, Any]
TYPE: Final = "ServerReady"
#: Container states that will not fix themselves by waiting a little.
FAILING: Final = frozenset({"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff",
                            "CreateContainerConfigError", "CreateContainerError",
                            "InvalidImageName", "RunContainerError"})


def is_complete(deployment: Object, replicas: int) -> bool:
    """Whether the rollout of the current template is done."""
    status = deployment.get("status") or {}
    if int(status.get("observedGeneration") or 0) < deployment["metadata"].get("generation", 0):
        return False
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    return updated >= replicas and total <= updated and available >= replicas


def failing_container(pods: Sequence[Object]) -> str | None:
    """The first container of these pods that cannot run, said in one line."""
    for pod in sorted(pods, key=lambda p: str(p["metadata"].get("name"))):
        status = pod.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []),
                    *(status.get("containerStatuses") or [])]
        for container in statuses:
            state = container.get("state") or {}
            waiting = state.get("waiting") or {}
            if waiting.get("reason") in FAILING:
                last = ((container.get("lastState") or {}).get("terminated") or {})
                exit_code = f", last exit code {last['exitCode']}" if "exitCode" in last else ""
                detail = f": {waiting['message']}" if waiting.get("message") else ""
                return (f"container {container.get('name')} of pod {pod['metadata']['name']}: "
                        f"{waiting['reason']}{exit_code}{detail}")[:512]
    return None


def _progress_deadline_exceeded(deployment: Object) -> str | None:
    for condition in (deployment.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Progressing" and \
                condition.get("reason") == "ProgressDeadlineExceeded":
            return str(condition.get("message") or "progress deadline exceeded")
    return None


def server_readiness(deployment: Object | None, replicas: int,
                     pods: Sequence[Object] = ()) -> Observation:
    """The ServerReady condition; ``pods`` are the server's pods (read only when not ready)."""
    if deployment is None:
        return Observation.of(TYPE, False, "WaitingForSchema",
                              "the server starts once the schema is ready")
    status = deployment.get("status") or {}
    if replicas == 0 and is_complete(deployment, 0):
        return Observation.of(TYPE, True, "ScaledToZero", "spec.server.replicas is 0")
    available = int(status.get("availableReplicas") or 0)
    if is_complete(deployment, replicas):
        return Observation.of(TYPE, True, "ServerAvailable",
                              f"{available}/{replicas} server pods available")
    updated = int(status.get("updatedReplicas") or 0)
    old = max(int(status.get("replicas") or 0) - updated, 0)
    progress = (f"{available}/{replicas} available, {updated} up to date"
                + (f", {old} of the previous template still running" if old else ""))
    stuck = _progress_deadline_exceeded(deployment)
    failing = failing_container(pods)
    if stuck:
        return Observation.of(TYPE, False, "RolloutStuck",
                              f"{progress}; {stuck}" + (f"; {failing}" if failing else ""))
    if failing:
        return Observation.of(TYPE, False, "ServerPodsFailing", f"{progress}; {failing}")
    return Observation.of(TYPE, False, "ServerRollingOut", progress)
