"""What the server's pods say about a rollout: which of them run the current template, which
are still terminating, and which cannot start and why. Pure; read by builders/rollout.py.

A pod is of the current template when its config-hash annotation is the Deployment's. The
kubelet reports a pod that cannot mount a volume only as ``ContainerCreating`` (the reason,
``FailedMount``, is in an Event), so a pod waiting there that references a Secret that does
not exist is named here as a crash loop is: on the real node a lost key Secret left a new
pod in ``ContainerCreating`` forever while the status said the rollout was progressing.
A server that refused to start over its master key (ADR 0088) is found by its last
termination message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.attest.masterkeys import REFUSED
from attested_cortex.builders.names import CONFIG_HASH_ANNOTATION

Object = dict[str, Any]
#: Container states that will not fix themselves by waiting a little.
FAILING: Final = frozenset({"CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff",
                            "CreateContainerConfigError", "CreateContainerError",
                            "InvalidImageName", "RunContainerError"})


@dataclass(frozen=True)
class Census:
    """Pods of the current template (all, ready) and of older ones; terminating pods."""

    current: int = 0
    current_ready: int = 0
    older: int = 0
    terminating: int = 0


def template_hash(deployment: Object) -> str:
    """The config-hash of the Deployment's pod template."""
    template = (deployment.get("spec") or {}).get("template") or {}
    return str(((template.get("metadata") or {}).get("annotations") or {}).get(
        CONFIG_HASH_ANNOTATION, ""))


def _ready(pod: Object) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def census(pods: Sequence[Object], current_hash: str) -> Census:
    """Count the pods; a terminating pod counts only as terminating."""
    current = ready = older = terminating = 0
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            terminating += 1
        elif (meta.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION) == current_hash:
            current += 1
            ready += _ready(pod)
        else:
            older += 1
    return Census(current=current, current_ready=ready, older=older, terminating=terminating)


def _statuses(pod: Object) -> list[Object]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or [])]


def _failing(pod: Object) -> str | None:
    for container in _statuses(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FAILING:
            last = (container.get("lastState") or {}).get("terminated") or {}
            exit_code = f", last exit code {last['exitCode']}" if "exitCode" in last else ""
            detail = f": {waiting['message']}" if waiting.get("message") else ""
            return (f"container {container.get('name')} of pod {pod['metadata']['name']}: "
                    f"{waiting['reason']}{exit_code}{detail}")
    return None


def key_refusal(pods: Sequence[Object]) -> str | None:
    """The master key refusal (ADR 0088) a server container of these pods last exited with,
    in one line (at most 512 characters): its termination message (the last log lines,
    ``FallbackToLogsOnError``) holds the line ``cortexctl serve`` printed."""
    for pod in sorted(pods, key=lambda p: str(p["metadata"].get("name"))):
        for container in _statuses(pod):
            last = (container.get("lastState") or {}).get("terminated") or {}
            for line in str(last.get("message") or "").splitlines():
                if REFUSED in line:
                    return (f"container {container.get('name')} of pod "
                            f"{pod['metadata']['name']}: {line.strip()}")[:512]
    return None


def required_secrets(pod_spec: Object) -> Iterator[tuple[str, str]]:
    """(Secret, what needs it) for every Secret a pod cannot start without."""
    for volume in pod_spec.get("volumes") or []:
        secret = volume.get("secret")
        if secret and not secret.get("optional"):
            yield str(secret.get("secretName")), f"volume {volume.get('name')}"
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref and not ref.get("optional"):
                yield str(ref.get("name")), f"variable {env.get('name')} of {container.get('name')}"


def _cannot_mount(pod: Object, exists: Callable[[str], bool]) -> str | None:
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or _ready(pod):
        return None
    waiting = [(c.get("state") or {}).get("waiting") or {} for c in _statuses(pod)]
    if waiting and not any(w.get("reason") == "ContainerCreating" for w in waiting):
        return None
    for secret, need in required_secrets(pod.get("spec") or {}):
        if not exists(secret):
            return (f"pod {meta.get('name')}: ContainerCreating, cannot mount Secret {secret} "
                    f"({need}): not found")
    return None


def failing_pod(pods: Sequence[Object], exists: Callable[[str], bool] = lambda _: True,
                ) -> str | None:
    """The first pod (by name) that cannot run, said in one line (at most 512 characters)."""
    for pod in sorted(pods, key=lambda p: str(p["metadata"].get("name"))):
        said = _failing(pod) or _cannot_mount(pod, exists)
        if said:
            return said[:512]
    return None
