"""ServerReady: a rollout is done only when the current template serves every replica."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.names import CONFIG_HASH_ANNOTATION
from attested_cortex.builders.rollout import failing_container, is_complete, server_readiness

HASH = CONFIG_HASH_ANNOTATION


def deployment(*, generation: int = 3, observed: int = 3, replicas: int = 1, updated: int = 1,
               available: int = 1, conditions: list[dict[str, str]] | None = None) -> Any:
    return {"metadata": {"name": "notes-server", "generation": generation},
            "spec": {"template": {"metadata": {"annotations": {HASH: "new"}}}},
            "status": {"observedGeneration": observed, "replicas": replicas,
                       "updatedReplicas": updated, "availableReplicas": available,
                       "conditions": conditions or []}}


def pod(name: str, *containers: dict[str, Any], template: str | None = None,
        terminating: bool = False, volumes: list[dict[str, Any]] | None = None) -> Any:
    """A pod as the kubelet reports it; Ready when every container runs."""
    template = template or ("old" if name.endswith("old") else "new")
    meta: dict[str, Any] = {"name": name, "annotations": {HASH: template}}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-02T04:00:00Z"
    ready = all("running" in c["state"] for c in containers)
    return {"metadata": meta, "spec": {"volumes": volumes or []},
            "status": {"containerStatuses": list(containers),
                       "conditions": [{"type": "Ready", "status": str(ready)}]}}


def waiting(name: str, reason: str, *, exit_code: int | None = None,
            message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "state": {"waiting": {"reason": reason}}}
    if message:
        status["state"]["waiting"]["message"] = message
    if exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": exit_code}}
    return status


RUNNING = {"name": "server", "state": {"running": {}}}


def test_complete_only_when_no_old_pod_is_left() -> None:
    assert is_complete(deployment(), 1)
    # The case found on the real node: the old pod available, the new one crash-looping.
    assert not is_complete(deployment(replicas=2, updated=1, available=1), 1)
    assert not is_complete(deployment(observed=2), 1)
    assert not is_complete(deployment(updated=1, available=1), 2)
    assert is_complete(deployment(replicas=0, updated=0, available=0), 0)


def test_ready_says_how_many() -> None:
    verdict = server_readiness(deployment(replicas=2, updated=2, available=2), 2)
    assert (verdict.status, verdict.reason, verdict.message) == (
        "True", "ServerAvailable", "2/2 server pods available")
    zero = server_readiness(deployment(replicas=0, updated=0, available=0), 0)
    assert (zero.status, zero.reason) == ("True", "ScaledToZero")
    assert server_readiness(None, 1).reason == "WaitingForSchema"


def test_a_crash_looping_sidecar_is_named_while_the_old_pod_serves() -> None:
    pods = [pod("notes-server-old", RUNNING),
            pod("notes-server-new", RUNNING,
                waiting("hook-crasher", "CrashLoopBackOff", exit_code=3,
                        message="back-off 40s restarting failed container"))]
    verdict = server_readiness(deployment(replicas=2, updated=1, available=1), 1, pods)
    assert (verdict.status, verdict.reason) == ("False", "ServerPodsFailing")
    assert verdict.message == (
        "0/1 of the current template ready, 1 starting, 1 of an older template still running; "
        "container "
        "hook-crasher of pod notes-server-new: CrashLoopBackOff, last exit code 3: back-off "
        "40s restarting failed container")


def test_a_rollout_in_progress_is_progressing_not_failing() -> None:
    pods = [pod("notes-server-a", {"name": "server",
                                   "state": {"waiting": {"reason": "ContainerCreating"}}})]
    verdict = server_readiness(deployment(updated=1, available=0), 1, pods)
    assert (verdict.status, verdict.reason) == ("False", "ServerRollingOut")
    assert verdict.message == "0/1 of the current template ready, 1 starting"


def test_past_the_progress_deadline_is_stuck() -> None:
    stuck = deployment(replicas=2, updated=1, available=1, conditions=[
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "notes-server-7d" has timed out progressing.'}])
    pods = [pod("notes-server-7d-x", waiting("server", "ImagePullBackOff",
                                              message="image not found"))]
    verdict = server_readiness(stuck, 1, pods)
    assert verdict.reason == "RolloutStuck"
    assert "has timed out progressing" in verdict.message
    assert "container server of pod notes-server-7d-x: ImagePullBackOff: image not found" \
        in verdict.message


def test_failing_init_containers_count_and_the_first_pod_by_name_is_named() -> None:
    init = {"metadata": {"name": "b"}, "status": {"initContainerStatuses": [
        waiting("init", "CreateContainerConfigError", message='secret "x" not found')]}}
    other = pod("c", waiting("server", "ErrImagePull"))
    assert failing_container([other, init]) == (
        'container init of pod b: CreateContainerConfigError: secret "x" not found')
    assert failing_container([pod("a", RUNNING)]) is None


def test_old_pods_still_terminating_keep_the_server_not_ready() -> None:
    # Found with kubectl wait: Ready while three older pods were still Terminating.
    pods = [pod("notes-server-a", RUNNING), pod("notes-server-old", RUNNING, terminating=True)]
    verdict = server_readiness(deployment(), 1, pods)
    assert (verdict.status, verdict.reason, verdict.message) == (
        "False", "ServerRollingOut", "1/1 of the current template ready, 1 terminating")
    assert server_readiness(deployment(), 1, pods[:1]).reason == "ServerAvailable"


def test_the_message_counts_only_the_current_template_as_ready() -> None:
    # The Deployment counts the old pod as available: "2/2 available" while 1 of 2 new ran.
    pods = [pod("notes-server-a", RUNNING), pod("notes-server-b", waiting("server", "Pulling")),
            pod("notes-server-old", RUNNING)]
    verdict = server_readiness(deployment(replicas=3, updated=2, available=2), 2, pods)
    assert verdict.message == ("1/2 of the current template ready, 1 starting, 1 of an older "
                               "template still running")


def test_a_pod_that_cannot_mount_a_missing_secret_is_named() -> None:
    key = {"name": "key-bob", "secret": {"secretName": "bob-agent-key"}}
    spare = {"name": "spare", "secret": {"secretName": "gone", "optional": True}}
    stuck = pod("notes-server-new", waiting("server", "ContainerCreating"), volumes=[spare, key])
    verdict = server_readiness(deployment(replicas=2, updated=1, available=1), 1,
                               [pod("notes-server-old", RUNNING), stuck],
                               exists=lambda name: name not in {"bob-agent-key", "gone"})
    assert (verdict.status, verdict.reason) == ("False", "ServerPodsFailing")
    assert verdict.message.endswith(
        "pod notes-server-new: ContainerCreating, cannot mount Secret bob-agent-key "
        "(volume key-bob): not found")
    present = server_readiness(deployment(replicas=2, updated=1, available=1), 1,
                               [pod("notes-server-old", RUNNING), stuck])
    assert present.reason == "ServerRollingOut"


def test_a_server_refusing_its_master_key_is_named_with_the_refusal() -> None:
    """ADR 0088: the refusal line ``cortexctl serve`` printed is the termination message."""
    said = ("cortexctl serve: master key refused, start refused: master key v1 is not the key "
            "this cortex was sealed with (loaded fingerprint 0123456789abcdef, the cortex's "
            "fedcba9876543210)")
    crashing = waiting("server", "CrashLoopBackOff", exit_code=1)
    crashing["lastState"]["terminated"]["message"] = f"some log line\n{said}\n"
    verdict = server_readiness(deployment(available=0), 1, [pod("notes-server-new", crashing)])
    assert (verdict.status, verdict.reason) == ("False", "MasterKeyRefused")
    assert verdict.message.endswith(f"container server of pod notes-server-new: {said}")
    plain = server_readiness(deployment(available=0), 1, [pod(
        "notes-server-new", waiting("server", "CrashLoopBackOff", exit_code=1))])
    assert plain.reason == "ServerPodsFailing"  # any other crash is what it was
