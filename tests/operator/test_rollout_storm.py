"""One ``kubectl apply`` of many PermissionRules rolls the server once, not once per rule.

Found on the real node (issue 21): 300 rules in one apply raised the server Deployment's
generation from 4 to 71 (about 65 rollouts in two minutes). The cortex now settles on its
satellites' changes (controller/queueing.py) before it rolls.
"""

from __future__ import annotations

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube
RULES = 150


def test_an_apply_of_many_rules_rolls_the_server_at_most_twice(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("storm"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/storm", "--timeout=120s")
    before = operated.get("deployment", "storm-server")["metadata"]["generation"]
    operated.apply(*(satellite("PermissionRule", f"rule-{i:03d}", "storm",
                               namespace=f"team-{i}/*", agents=["*"], operations=["store"],
                               decision="Allow", priority=i) for i in range(RULES)))

    def summarised() -> bool:
        status = (operated.get("MemoryCortex", "storm") or {}).get("status") or {}
        return len(status.get("ruleSummary") or []) == RULES

    wait_until(summarised, what=f"{RULES} rules in the cortex's status", seconds=180,
               interval_s=0.2)
    operated.kubectl("wait", "--for=condition=Ready", "mcx/storm", "--timeout=120s")
    after = operated.get("deployment", "storm-server")["metadata"]["generation"]
    assert 1 <= after - before <= 2, f"generation {before} -> {after}"
    replica_sets = operated.kubectl("get", "replicasets", "-l",
                                    "app.kubernetes.io/instance=storm,"
                                    "app.kubernetes.io/component=server", "-o", "name")
    assert len(replica_sets.stdout.split()) <= 4  # revisionHistoryLimit 3 and the current
