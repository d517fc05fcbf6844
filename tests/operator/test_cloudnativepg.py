"""A ``cloudNativePG`` cortex on the control plane, with the chart's RBAC.

Only CloudNativePG's Cluster CRD is installed here (from its 1.27.1 release manifest): no
CloudNativePG operator runs, so no Cluster ever gets a status and none is written by hand.
What is tested is what our operator does by itself: CloudNativePG missing (the condition,
the command, nothing crashing), installed later (the cortex proceeds with the same operator
process), the Cluster it applies (spec, owner, labels, one field manager), spec changes
passed through, and a Cluster the API server refuses reported in the API's words. The
behaviour with CloudNativePG running is e2e/ on the real node.

The tests run in file order: the first one starts the operator while the CRD is absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from tests.operator.conftest import Object, Operated, OperatorProcess, cortex
from tests.support.cnpgcrd import CRD_NAME, cluster_crd, install

pytestmark = pytest.mark.kube

CLUSTER = "clusters.postgresql.cnpg.io"
HA = {"cloudNativePG": {"instances": 3, "storage": {"size": "2Gi"},
                        "synchronous": {"number": 1},
                        "parameters": {"max_connections": "150"}}}


@pytest.fixture(scope="module")
def without_cloudnativepg(kube: Kube) -> Iterator[None]:
    """CloudNativePG's CRD absent when the module's operator starts; absent again after."""
    kube.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true")
    yield
    kube.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def running(without_cloudnativepg: None, operated: Operated) -> OperatorProcess:
    return operated.start()


def cluster_of(operated: Operated, name: str) -> Object:
    return wait_until(lambda: operated.get(CLUSTER, f"{name}-db"),
                      what=f"Cluster {name}-db", seconds=90, interval_s=0.5)


def events_of(operated: Operated, name: str, reason: str) -> list[Object]:
    listed = json.loads(operated.kubectl("get", "events", "-o", "json", "--field-selector",
                                         f"involvedObject.name={name}").stdout)
    return [e for e in listed["items"] if e.get("reason") == reason]


def status_of(operated: Operated, name: str) -> Object:
    status: Object = (operated.get("MemoryCortex", name) or {}).get("status") or {}
    return status


def test_missing_cloudnativepg_is_reported_and_the_cortex_proceeds_once_installed(
        operated: Operated, running: OperatorProcess) -> None:
    operated.apply(cortex("ha", database=HA))
    missing = operated.wait_condition("MemoryCortex", "ha", "DatabaseReady", "False",
                                      reason="CloudNativePGMissing")
    assert "kubectl apply --server-side -f" in missing["message"]
    assert "cnpg-1.27.1.yaml" in missing["message"]
    ready = operated.condition("MemoryCortex", "ha", "Ready") or {}
    assert (ready.get("status"), ready.get("reason")) == ("False", "CloudNativePGMissing")
    assert status_of(operated, "ha")["databaseMode"] == "CloudNativePG"
    assert operated.get("Job", "ha-migrate-v10") is None
    assert operated.get("Deployment", "ha-server") is None
    warned = wait_until(lambda: events_of(operated, "ha", "CloudNativePGMissing"),
                        what="a CloudNativePGMissing event", seconds=30, interval_s=0.5)
    assert warned[0]["type"] == "Warning"

    install(operated.kube, cluster_crd())
    cluster_of(operated, "ha")
    operated.wait_condition("MemoryCortex", "ha", "DatabaseReady", "False",
                            reason="ClusterCreating")
    assert wait_until(lambda: events_of(operated, "ha", "ClusterCreating"),
                      what="a ClusterCreating event", seconds=30, interval_s=0.5)
    assert running.process.poll() is None and len(operated.running) == 1
    assert "Traceback" not in running.output()


def test_the_cluster_is_owned_labelled_and_built_from_the_spec(
        operated: Operated, running: OperatorProcess) -> None:
    owner = operated.get("MemoryCortex", "ha") or {}
    cluster_of(operated, "ha")
    cluster = json.loads(operated.kubectl("get", CLUSTER, "ha-db", "-o", "json",
                                          "--show-managed-fields").stdout)
    meta = cluster["metadata"]
    namespace = json.loads(operated.kube.kubectl("get", "namespace", operated.namespace,
                                                 "-o", "json").stdout)
    assert meta["ownerReferences"] == [
        {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "MemoryCortex", "name": "ha",
         "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True},
        {"apiVersion": "v1", "kind": "Namespace", "name": operated.namespace,
         "uid": namespace["metadata"]["uid"]}]
    assert meta["labels"] == {"app.kubernetes.io/name": "attested-cortex",
                              "app.kubernetes.io/instance": "ha",
                              "app.kubernetes.io/component": "database",
                              "app.kubernetes.io/managed-by": "attested-cortex-operator"}
    assert {f["manager"] for f in meta["managedFields"]} == {"attested-cortex-operator"}
    spec = cluster["spec"]
    assert spec["instances"] == 3
    assert spec["postgresql"]["synchronous"] == {"method": "any", "number": 1,
                                                 "dataDurability": "required"}
    assert spec["postgresql"]["shared_preload_libraries"] == ["age"]
    assert spec["postgresql"]["parameters"] == {"max_connections": "150",
                                                "wal_retrieve_retry_interval": "200ms"}
    assert spec["storage"]["size"] == "2Gi" and "storageClass" not in spec["storage"]
    assert spec["bootstrap"]["initdb"]["owner"] == "cortex"
    assert (spec["postgresUID"], spec["postgresGID"]) == (999, 999)
    # No CloudNativePG runs here: no status, so no migration and no server yet.
    assert "status" not in cluster
    assert operated.get("Deployment", "ha-server") is None
    row = operated.kubectl("get", "mcx", "ha", "--no-headers").stdout.split()
    assert row[1:4] == ["False", "ClusterCreating", "CloudNativePG"]


def test_spec_changes_pass_through_to_the_cluster(operated: Operated,
                                                  running: OperatorProcess) -> None:
    changed = {"cloudNativePG": {**HA["cloudNativePG"], "instances": 5,
                                 "parameters": {"work_mem": "32MB"},
                                 "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}}
    operated.apply(cortex("ha", database=changed))

    def passed(cluster: Object) -> bool:
        spec = cluster["spec"]
        return (spec["instances"] == 5
                and spec["postgresql"].get("parameters") == {
                    "wal_retrieve_retry_interval": "200ms", "work_mem": "32MB"}
                and spec.get("resources", {}).get("requests") == {"cpu": "250m",
                                                                  "memory": "512Mi"})
    wait_until(lambda: passed(operated.get(CLUSTER, "ha-db") or {"spec": {}}),
               what="the Cluster to follow the cortex's spec", seconds=60, interval_s=0.5)


def _policy(namespace: str) -> list[Object]:
    name = f"at-most-five-{namespace}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": ["postgresql.cnpg.io"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["clusters"]}]},
                       "validations": [{"expression": "object.spec.instances <= 5",
                                        "message": "this platform allows at most 5 PostgreSQL "
                                                   "instances per cluster",
                                        "reason": "Invalid"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": namespace}}}}}
    return [policy, binding]


def _refused_now(operated: Operated, instances: int) -> bool:
    probe = {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
             "metadata": {"name": "probe"}, "spec": {"instances": instances,
                                                     "storage": {"size": "1Gi"}}}
    result = operated.kubectl("create", "--dry-run=server", "-f", "-",
                              input=json.dumps(probe), check=False)
    return result.returncode != 0 and "at most 5 PostgreSQL instances" in result.stderr


def test_a_cluster_the_api_refuses_is_reported_in_its_words(operated: Operated,
                                                             running: OperatorProcess) -> None:
    # A platform's admission policy stands where CloudNativePG's own webhook would refuse:
    # the same path (a 422 with the refusal's message) through a real API server check.
    documents: list[Any] = _policy(operated.namespace)
    operated.kube.kubectl("apply", "-f", "-",
                          input="\n---\n".join(yaml.safe_dump(d) for d in documents))
    try:
        wait_until(lambda: _refused_now(operated, 6), what="the admission policy in force",
                   seconds=60, interval_s=0.5)
        too_many = {"cloudNativePG": {**HA["cloudNativePG"], "instances": 6}}
        operated.apply(cortex("ha", database=too_many))
        refused = operated.wait_condition("MemoryCortex", "ha", "Ready", "False",
                                          reason="ApplyRefused")
        assert "at most 5 PostgreSQL instances per cluster" in refused["message"]
        assert (operated.get(CLUSTER, "ha-db") or {})["spec"]["instances"] == 5
        assert running.process.poll() is None
    finally:
        for document in reversed(documents):
            operated.kube.kubectl("delete", document["kind"], document["metadata"]["name"],
                                  "--ignore-not-found", check=False)


def controller_uid(cluster: Object | None) -> str | None:
    refs = ((cluster or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((r["uid"] for r in refs if r.get("controller")), None)


def test_the_cluster_outlives_its_cortex_and_is_adopted_by_the_next(
        operated: Operated, running: OperatorProcess) -> None:
    operated.apply(cortex("keep", database=HA))
    first = cluster_of(operated, "keep")
    operated.kubectl("delete", "mcx", "keep", "--wait=true")
    # The garbage collector drops the deleted cortex's reference; the Namespace's keeps it.
    orphaned = wait_until(
        lambda: (c := operated.get(CLUSTER, "keep-db")) and controller_uid(c) is None and c,
        what="Cluster keep-db without its deleted cortex's reference", seconds=90,
        interval_s=0.5)
    assert orphaned["metadata"]["uid"] == first["metadata"]["uid"]
    operated.apply(cortex("keep", database=HA))
    again = operated.get("MemoryCortex", "keep") or {}
    adopted = wait_until(
        lambda: (c := operated.get(CLUSTER, "keep-db")) and controller_uid(c) == again[
            "metadata"]["uid"] and c,
        what="Cluster keep-db adopted by the new cortex", seconds=60, interval_s=0.5)
    assert adopted["metadata"]["uid"] == first["metadata"]["uid"]  # the same data


def test_a_cluster_someone_else_controls_is_left_alone(operated: Operated,
                                                       running: OperatorProcess) -> None:
    operated.kubectl("create", "configmap", "holder")
    holder = operated.get("ConfigMap", "holder") or {}
    theirs = {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
              "metadata": {"name": "taken-db", "ownerReferences": [{
                  "apiVersion": "v1", "kind": "ConfigMap", "name": "holder",
                  "uid": holder["metadata"]["uid"], "controller": True}]},
              "spec": {"instances": 1, "storage": {"size": "1Gi"}}}
    operated.kubectl("create", "-f", "-", input=json.dumps(theirs))
    operated.apply(cortex("taken", database=HA))
    refused = operated.wait_condition("MemoryCortex", "taken", "DatabaseReady", "False",
                                      reason="NameCollision")
    assert "Cluster taken-db is controlled by ConfigMap holder" in refused["message"]
    assert (operated.get(CLUSTER, "taken-db") or {})["spec"]["instances"] == 1


def test_an_operator_started_with_cloudnativepg_installed_watches_its_clusters(
        operated: Operated, running: OperatorProcess) -> None:
    assert "Unresolved resources" in running.output()  # the first one started without it
    operated.stop_all()
    watching = operated.start()
    operated.kubectl("patch", CLUSTER, "keep-db", "--type=merge",
                     "-p", json.dumps({"spec": {"instances": 1}}))
    wait_until(lambda: (operated.get(CLUSTER, "keep-db") or {})["spec"]["instances"] == 3,
               what="the hand-edited Cluster put back to the cortex's spec", seconds=60,
               interval_s=0.5)
    assert "Unresolved resources" not in watching.output()
    assert "Traceback" not in watching.output()
