"""The operator touches only its own ClusterRoleBindings (issue 21, item 6).

The chart's ValidatingAdmissionPolicy refuses the operator's ServiceAccount any other
binding (tests/chart/test_rbac.py); here the operator itself keeps to its own: the start-up
sweep of orphaned TokenReview bindings used to delete every managed binding whose cortex it
did not see, which for an operator watching one namespace meant the bindings of cortexes in
every other namespace.
"""

from __future__ import annotations

import json

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, satellite

pytestmark = pytest.mark.kube


def _binding(namespace: str, cortex: str) -> str:
    return json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"attested-cortex:{namespace}:{cortex}", "labels": {
            "app.kubernetes.io/managed-by": "attested-cortex-operator",
            "app.kubernetes.io/instance": cortex, "cortex.attested.dev/namespace": namespace}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"}, "subjects": []})


def _exists(operated: Operated, name: str) -> bool:
    return operated.kube.kubectl("get", "clusterrolebinding", name, check=False).returncode == 0


def test_the_orphan_sweep_keeps_to_the_watched_namespace(operated: Operated) -> None:
    other = f"{operated.namespace}-elsewhere"  # another team's cortex, another operator
    mine, theirs = (f"attested-cortex:{ns}:ghost" for ns in (operated.namespace, other))
    for namespace in (operated.namespace, other):
        operated.kube.kubectl("create", "-f", "-", input=_binding(namespace, "ghost"))
    try:
        run = operated.start()
        # The sweep runs once the first watch event arrives (the views are filled by then).
        operated.apply(satellite("PermissionRule", "wake", "nothing", namespace="a/*",
                                 agents=["*"], operations=["store"], decision="Allow"))
        wait_until(lambda: not _exists(operated, mine), what="this namespace's orphan swept",
                   seconds=60, interval_s=0.2)
        assert _exists(operated, theirs)
        assert "orphan sweep failed" not in run.output()
    finally:
        for name in (mine, theirs):
            operated.kube.kubectl("delete", "clusterrolebinding", name, check=False)
