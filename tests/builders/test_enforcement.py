"""A HookChain's InForce: accepted is not running (issue 21, item 5)."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.enforcement import in_force
from attested_cortex.crd.hookchain import Hook

DAEMON = Hook.model_validate({"name": "audit", "events": ["post_store"], "mode": "Daemon",
                              "sidecar": {"image": "example.invalid/audit:1"}})
EXEC = Hook.model_validate({"name": "redact", "events": ["pre_store"], "mode": "Exec",
                            "command": ["redact"]})
FAILING = {"type": "ServerReady", "status": "False", "reason": "ServerPodsFailing",
           "message": "0/1 of the current template ready; container hook-audit of pod p: "
                      "ImagePullBackOff"}


def deployment(*containers: str, replicas: int = 1, updated: int = 1, total: int = 1,
               available: int = 1) -> Any:
    return {"metadata": {"generation": 2},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": c} for c in ("server", *containers)]}}},
            "status": {"observedGeneration": 2, "replicas": total, "updatedReplicas": updated,
                       "availableReplicas": available}}


def test_a_daemon_hook_whose_rollout_fails_is_not_running_in_the_cortex_words() -> None:
    verdict = in_force([DAEMON], deployment("hook-audit", total=2), FAILING)
    assert (verdict.type, verdict.status, verdict.reason) == ("InForce", "False", "NotRunning")
    assert verdict.message == (
        "hook audit runs in no serving pod of the current template yet; the cortex says: "
        + FAILING["message"])


def test_a_daemon_hook_not_yet_in_the_template_is_not_running() -> None:
    verdict = in_force([DAEMON], deployment(), None)
    assert (verdict.status, verdict.message) == (
        "False", "the server template does not carry hook audit yet")
    assert in_force([DAEMON], None, None).message == "the cortex has no server yet"


def test_in_force_once_the_current_template_serves() -> None:
    verdict = in_force([DAEMON, EXEC], deployment("hook-audit"), None)
    assert (verdict.status, verdict.reason) == ("True", "Running")
    # An Exec hook runs in the server container, which re-reads the hook file.
    assert in_force([EXEC], deployment(total=2), FAILING).status == "True"
    assert in_force([EXEC], deployment(replicas=0, available=0), None).reason == "NotRunning"
