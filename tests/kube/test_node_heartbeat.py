"""The kwok node keeps its heartbeat, so pods stay Ready for as long as the cluster runs.

The controller manager declares a node dead 50 s (node-monitor grace period, checked every
5 s) after its last heartbeat, a status update or a renewal of its Lease, and then marks every
pod on it NotReady. This test holds a Ready pod for 60 s past that, which is the only honest
proof, and waits on the Lease's renewal time rather than sleeping.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from tests.kube import manifests

pytestmark = pytest.mark.kube
WAIT = "--timeout=120s"
NODE = "kwok-node-0"
HELD_FOR = timedelta(seconds=60)  # > grace period 50 s + monitor period 5 s


def _get(kube: Kube, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", *args, "-o", "json").stdout)
    return found


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    ready: dict[str, Any] = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return ready


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_pod_stays_ready_past_the_node_monitor_grace_period(kube: Kube,
                                                               kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.deployment("steady", replicas=1))
    kube.kubectl("rollout", "status", "-n", kube_namespace, "deployment/steady", WAIT)
    [pod] = _get(kube, "pods", "-n", kube_namespace, "-l", "app=steady")["items"]
    pod_ready = _ready(pod)
    renewals: list[datetime] = []

    def lease_renewed_long_after_pod_ready() -> bool:
        node, lease = _get(kube, f"node/{NODE}", f"lease/{NODE}", "-n", "kube-node-lease")["items"]
        assert _ready(node)["status"] == "True", f"node lost Ready: {_ready(node)}"
        renewed = _time(lease["spec"]["renewTime"])
        if not renewals or renewed > renewals[-1]:
            renewals.append(renewed)
        return renewed - _time(pod_ready["lastTransitionTime"]) > HELD_FOR

    wait_until(lease_renewed_long_after_pod_ready, seconds=120, interval_s=2,
               what=f"the {NODE} lease renewed {HELD_FOR.seconds}s after the pod became Ready")
    after = _get(kube, "pod", "-n", kube_namespace, pod["metadata"]["name"])
    assert _ready(after) == pod_ready  # still True, never flipped in between
    # The controller manager records "Node is not ready" on each pod it marks NotReady.
    events = _get(kube, "events", "-n", kube_namespace, "--field-selector=reason=NodeNotReady")
    assert events["items"] == []
    assert len(renewals) >= 4  # kwok renews every 10 s (lease duration 40 s / 4)
