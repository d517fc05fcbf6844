"""A HookChain or PermissionRule is in force only while the serving pods of the cortex's
current template run it.

Found on the real node (issue 21, item 5): with a sidecar image that does not exist the
cortex said ``ServerPodsFailing`` and the old pod served, but the HookChain said
``Ready=True HooksInForce``. kwok runs every scheduled pod, so the test keeps the new pod
unscheduled (the kwok nodes cordoned) and writes its status as the kubelet would after a
failed pull. The PermissionRule said ``RuleInForce`` as soon as it compiled, though the
server reads its rules only at start (the same flaw in another kind).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube

BROKEN = {"name": "audit", "events": ["post_store"], "mode": "Daemon",
          "sidecar": {"image": "example.invalid/missing:1", "command": ["audit-hook"]}}
PULL_FAILED = {"phase": "Pending", "containerStatuses": [
    {"name": "hook-audit", "image": "example.invalid/missing:1", "imageID": "", "ready": False,
     "restartCount": 0, "state": {"waiting": {
         "reason": "ImagePullBackOff",
         "message": 'Back-off pulling image "example.invalid/missing:1"'}}}]}


@contextmanager
def cordoned(operated: Operated) -> Iterator[list[str]]:
    """Every node cordoned: a new pod stays Pending, as one whose image cannot be pulled."""
    nodes = operated.kube.kubectl("get", "nodes", "-o", "name").stdout.split()
    for node in nodes:
        operated.kube.kubectl("cordon", node)
    try:
        yield nodes
    finally:
        for node in nodes:
            operated.kube.kubectl("uncordon", node, check=False)


def _new_pod(operated: Operated) -> str | None:
    pods = json.loads(operated.kubectl("get", "pods", "-l", "app.kubernetes.io/instance=inforce,"
                                       "app.kubernetes.io/component=server",
                                       "-o", "json").stdout)["items"]
    pending = [p["metadata"]["name"] for p in pods
               if any(c["name"] == "hook-audit" for c in p["spec"]["containers"])]
    return pending[0] if pending else None


def test_a_sidecar_that_cannot_run_is_not_in_force(operated: Operated,
                                                   operator: OperatorProcess) -> None:
    operated.apply(cortex("inforce"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/inforce", "--timeout=120s")
    with cordoned(operated) as nodes:
        operated.apply(satellite("HookChain", "broken", "inforce", hooks=[BROKEN]))
        pod = wait_until(lambda: _new_pod(operated), what="the new server pod", seconds=90,
                         interval_s=0.2)
        operated.kubectl("patch", "pod", pod, "--subresource=status", "--type=merge",
                         "-p", json.dumps({"status": PULL_FAILED}))
        operated.wait_condition("MemoryCortex", "inforce", "ServerReady", "False",
                                reason="ServerPodsFailing")
        ready = operated.wait_condition("HookChain", "broken", "Ready", "False",
                                        reason="NotRunning")
        assert "ImagePullBackOff" in ready["message"] and "audit" in ready["message"]
        status = operated.get("HookChain", "broken")["status"]
        assert [h["name"] for h in status["acceptedHooks"]] == ["audit"]  # rendered, not run
        assert next(c for c in status["conditions"] if c["type"] == "Accepted")["status"] \
            == "True"
        # Once the pod can run (the nodes back), the sidecar serves: the chain is in force.
        for node in nodes:
            operated.kube.kubectl("uncordon", node)
        operated.kubectl("wait", "--for=condition=Ready", "mcx/inforce", "--timeout=120s")
        running = operated.wait_condition("HookChain", "broken", "Ready", "True",
                                          reason="HooksInForce")
        assert running["message"] == "hooks run in the cortex's serving pods"


def test_a_rule_is_in_force_only_once_the_pods_that_load_it_serve(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("ruling"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/ruling", "--timeout=120s")
    with cordoned(operated) as nodes:
        operated.apply(satellite("PermissionRule", "deny-all", "ruling", namespace="x/**",
                                 agents=["*"], operations=["store"], decision="Deny"))
        operated.wait_condition("PermissionRule", "deny-all", "Accepted", "True")
        pending = operated.wait_condition("PermissionRule", "deny-all", "Ready", "False",
                                          reason="NotRunning")
        assert "not yet" in pending["message"]
        for node in nodes:
            operated.kube.kubectl("uncordon", node)
        ready = operated.wait_condition("PermissionRule", "deny-all", "Ready", "True",
                                        reason="RuleInForce", seconds=120)
        assert ready["message"] == "rule in force"
