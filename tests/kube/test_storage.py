"""Claims bind to the control plane's static volumes, so StatefulSets with storage run.

Every wait is a bounded ``kubectl wait``/``rollout status`` on a condition.
"""

from __future__ import annotations

import json

import pytest
from hack.support.kube import Kube

from tests.kube import manifests

pytestmark = pytest.mark.kube
WAIT = "--timeout=120s"


def test_a_statefulset_claim_binds_and_its_pod_runs(kube: Kube, kube_namespace: str) -> None:
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.statefulset("db", replicas=1, volume_size="10Gi"))
    kube.kubectl("wait", "-n", kube_namespace, "--for=jsonpath={.status.phase}=Bound",
                 "pvc/data-db-0", WAIT)
    kube.kubectl("rollout", "status", "-n", kube_namespace, "statefulset/db", WAIT)
    claim = json.loads(kube.kubectl("get", "-n", kube_namespace, "pvc/data-db-0",
                                    "-o", "json").stdout)
    assert claim["spec"]["storageClassName"] == "local"  # the default class, not named
    assert claim["status"]["capacity"]["storage"] == "10Gi"
    pod = json.loads(kube.kubectl("get", "-n", kube_namespace, "pod/db-0", "-o", "json").stdout)
    assert pod["status"]["phase"] == "Running"
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
            if "persistentVolumeClaim" in v] == ["data-db-0"]


def test_added_volumes_serve_claims_of_another_size(kube: Kube, kube_namespace: str) -> None:
    [name] = kube.add_volumes(1, size="50Gi")
    kube.kubectl("apply", "-n", kube_namespace, "-f", "-",
                 input=manifests.statefulset("big", replicas=1, volume_size="50Gi"))
    kube.kubectl("wait", "-n", kube_namespace, "--for=jsonpath={.status.phase}=Bound",
                 "pvc/data-big-0", WAIT)
    bound_to = kube.kubectl("get", "-n", kube_namespace, "pvc/data-big-0",
                            "-o", "jsonpath={.spec.volumeName}").stdout
    assert bound_to == name
    kube.kubectl("rollout", "status", "-n", kube_namespace, "statefulset/big", WAIT)
