"""CloudNativePG, built here, runs our database image: the operand half of issue 23, by itself.

A platform team's first check before pointing a MemoryCortex at CNPG: CNPG installed from its
release manifest (tests/support/cnpg.py: the operator Available, its admission webhooks
answering through the node bridge), then a plain 3-instance synchronous ``Cluster`` of
``attested-cortex/postgres-age:17`` written by hand becomes Ready by itself: CNPG reads the
major version from the tag, its instance manager (copied in by the bootstrap init container)
runs initdb, pg_ctl, pg_basebackup for the replicas from the image's PATH, with AGE preloaded
through the Cluster's ``postgresql`` section, the pods running as the image's postgres user.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hack.cnpg import POSTGRES_IMAGE
from tests.support.cnpg import CloudNativePG

from e2e.conftest import kubectl, kubectl_json

READY = "420s"  # three instances one after the other (initdb, then two pg_basebackups)


def operand_cluster(name: str, namespace: str, instances: int) -> dict[str, Any]:
    """The Cluster a platform engineer would write by hand for our image."""
    return {
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "instances": instances,
            "imageName": POSTGRES_IMAGE,
            "postgresUID": 999, "postgresGID": 999,
            "storage": {"size": "1Gi"},
            "postgresql": {"shared_preload_libraries": ["age"],
                           "synchronous": {"method": "any", "number": 1}},
            "bootstrap": {"initdb": {"database": "cortex", "owner": "cortex"}},
        },
    }


@pytest.fixture(scope="module")
def cluster_namespace(cnpg: CloudNativePG) -> Iterator[str]:
    name = f"cnpg-{uuid.uuid4().hex[:6]}"
    assert kubectl("create", "namespace", name).returncode == 0
    kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def test_three_instances_of_our_image_become_ready(cluster_namespace: str) -> None:
    cluster = operand_cluster("operand", cluster_namespace, instances=3)
    applied = kubectl("apply", "--server-side", "-f", "-", input=json.dumps(cluster))
    assert applied.returncode == 0, applied.stderr
    waited = kubectl("wait", "-n", cluster_namespace, "--for=condition=Ready",
                     "cluster.postgresql.cnpg.io/operand", f"--timeout={READY}")
    described = kubectl("get", "-n", cluster_namespace, "pods", "-o", "wide")
    assert waited.returncode == 0, waited.stderr + described.stdout
    status = kubectl_json("get", "-n", cluster_namespace, "cluster.postgresql.cnpg.io/operand")
    assert status["status"]["readyInstances"] == 3
    primary = status["status"]["currentPrimary"]
    queried = kubectl("exec", "-n", cluster_namespace, primary, "-c", "postgres", "--", "psql",
                      "-XAtq", "-d", "cortex", "-c",
                      "SELECT current_setting('shared_preload_libraries'), "
                      "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN "
                      "('sync', 'quorum')), version()")
    assert queried.returncode == 0, queried.stderr
    preload, synchronous, version = queried.stdout.strip().split("|")
    assert "age" in preload
    assert int(synchronous) >= 1
    assert version.startswith("PostgreSQL 17.")
