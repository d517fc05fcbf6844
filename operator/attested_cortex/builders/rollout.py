"""ServerReady from the server Deployment and its pods. Pure.

Ready means what ``kubectl rollout status`` means and a little more: every replica runs the
current template and is available, and no pod of an older template is left, not even one
still terminating (``kubectl wait --for=condition=Ready`` returned while three old pods were
Terminating). Counting available pods alone called a rollout done while the old pod still
served and the new one crash-looped (found on the real node with a sidecar that exits), and
the progress message counted old pods as available; it now says what is true of the current
template. While a rollout is incomplete the message names the first pod that cannot run
(crash loop, image pull, bad configuration, a Secret it cannot mount: builders/podstates.py)
so ``kubectl get mcx`` says why, and a Deployment past its progress deadline is
``RolloutStuck``. A server that refused to start over its master key (ADR 0088) is
``MasterKeyRefused``, its refusal quoted. Called by controller/memorycortex/server.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from attested_cortex.builders import podstates
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.podstates import Census

Object = dict[str, Any]
TYPE: Final = "ServerReady"


def is_complete(deployment: Object, replicas: int) -> bool:
    """Whether the Deployment says the rollout of the current template is done."""
    status = deployment.get("status") or {}
    if int(status.get("observedGeneration") or 0) < deployment["metadata"].get("generation", 0):
        return False
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    return updated >= replicas and total <= updated and available >= replicas


def failing_container(pods: Sequence[Object]) -> str | None:
    """The first pod of these that cannot run, said in one line."""
    return podstates.failing_pod(pods)


def _progress_deadline_exceeded(deployment: Object) -> str | None:
    for condition in (deployment.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Progressing" and \
                condition.get("reason") == "ProgressDeadlineExceeded":
            return str(condition.get("message") or "progress deadline exceeded")
    return None


def _progress(deployment: Object, replicas: int, counted: Census | None) -> str:
    """What is true of the current template, and what older pods are left."""
    status = deployment.get("status") or {}
    if counted is None:
        return f"{int(status.get('updatedReplicas') or 0)}/{replicas} up to date"
    said = f"{counted.current_ready}/{replicas} of the current template ready"
    if counted.current > counted.current_ready:
        said += f", {counted.current - counted.current_ready} starting"
    if counted.older:
        said += f", {counted.older} of an older template still running"
    if counted.terminating:
        said += f", {counted.terminating} terminating"
    return said


def server_readiness(deployment: Object | None, replicas: int, pods: Sequence[Object] = (),
                     *, exists: Callable[[str], bool] = lambda _: True) -> Observation:
    """The ServerReady condition; ``pods`` are the server's pods, ``exists`` says whether a
    Secret of the namespace exists (to name a pod that cannot mount one)."""
    if deployment is None:
        return Observation.of(TYPE, False, "WaitingForSchema",
                              "the server starts once the schema is ready")
    counted = podstates.census(pods, podstates.template_hash(deployment)) if pods else None
    settled = counted is None or (counted.older == 0 and counted.terminating == 0)
    if replicas == 0 and is_complete(deployment, 0) and settled:
        return Observation.of(TYPE, True, "ScaledToZero", "spec.server.replicas is 0")
    available = int((deployment.get("status") or {}).get("availableReplicas") or 0)
    if is_complete(deployment, replicas) and settled:
        return Observation.of(TYPE, True, "ServerAvailable",
                              f"{available}/{replicas} server pods available")
    progress = _progress(deployment, replicas, counted)
    stuck = _progress_deadline_exceeded(deployment)
    failing = podstates.failing_pod(pods, exists)
    refused = podstates.key_refusal(pods)
    if refused:  # waiting will not help: the Secret holds another key, or none is mounted
        return Observation.of(TYPE, False, "MasterKeyRefused", f"{progress}; {refused}")
    if stuck:
        return Observation.of(TYPE, False, "RolloutStuck",
                              f"{progress}; {stuck}" + (f"; {failing}" if failing else ""))
    if failing:
        return Observation.of(TYPE, False, "ServerPodsFailing", f"{progress}; {failing}")
    return Observation.of(TYPE, False, "ServerRollingOut", progress)
