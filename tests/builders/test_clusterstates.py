"""DatabaseReady from a CloudNativePG Cluster's status: literals shaped as CloudNativePG 1.27
writes them (api/v1/cluster_types.go: ClusterStatus), checked for what the cortex reports."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.clusterstates import observe

Object = dict[str, Any]
NAME = "notes-db"


def cluster(generation: int = 1, **status: Any) -> Object:
    return {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
            "metadata": {"name": NAME, "generation": generation}, "status": status}


def ready(status: str, generation: int = 1) -> list[Object]:
    return [{"type": "Ready", "status": status, "observedGeneration": generation,
             "reason": "ClusterIsReady" if status == "True" else "ClusterIsNotReady",
             "message": "Cluster is Ready" if status == "True" else "Cluster Is Not Ready",
             "lastTransitionTime": "2026-12-02T06:00:00Z"}]


HEALTHY = {"instances": 3, "readyInstances": 3, "phase": "Cluster in healthy state",
           "currentPrimary": "notes-db-1", "targetPrimary": "notes-db-1",
           "instancesStatus": {"healthy": ["notes-db-1", "notes-db-2", "notes-db-3"]},
           "conditions": ready("True")}


def test_not_created_yet() -> None:
    state = observe(None, name=NAME)
    assert (state.condition.status, state.condition.reason) == ("False", "ClusterCreating")
    assert state.primary is None


def test_a_new_cluster_without_status_is_creating() -> None:
    state = observe(cluster(), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("False", "ClusterCreating")
    assert "not started by CloudNativePG yet" in state.condition.message


def test_setting_up_the_first_primary() -> None:
    state = observe(cluster(instances=3, phase="Setting up primary", targetPrimary="notes-db-1",
                            conditions=ready("False")), name=NAME)
    assert state.condition.reason == "ClusterCreating"
    assert "Setting up primary" in state.condition.message
    assert "0/3 instances ready" in state.condition.message


def test_healthy_names_the_primary_and_the_instances() -> None:
    state = observe(cluster(**HEALTHY), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("True", "ClusterHealthy")
    assert state.condition.message == "Cluster notes-db: primary notes-db-1, 3/3 instances ready"
    assert state.primary == "notes-db-1"


def test_a_replica_being_rebuilt_still_takes_writes() -> None:
    status = {**HEALTHY, "readyInstances": 2, "phase": "Creating a new replica",
              "instancesStatus": {"healthy": ["notes-db-1", "notes-db-2"],
                                  "failed": ["notes-db-3"]},
              "conditions": ready("False")}
    state = observe(cluster(**status), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("True", "ClusterDegraded")
    assert "2/3 instances ready" in state.condition.message
    assert "Creating a new replica" in state.condition.message


def test_failover_in_progress_is_not_ready() -> None:
    status = {**HEALTHY, "phase": "Failing over", "targetPrimary": "notes-db-2",
              "readyInstances": 2, "conditions": ready("False")}
    state = observe(cluster(**status), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("False", "PrimaryChanging")
    assert "from notes-db-1 to notes-db-2" in state.condition.message
    assert state.primary == "notes-db-1"


def test_after_failover_the_new_primary_is_reported() -> None:
    status = {**HEALTHY, "currentPrimary": "notes-db-2", "targetPrimary": "notes-db-2"}
    assert observe(cluster(**status), name=NAME).primary == "notes-db-2"


def test_a_primary_that_is_not_healthy() -> None:
    status = {**HEALTHY, "instancesStatus": {"healthy": ["notes-db-2", "notes-db-3"]},
              "conditions": ready("False"), "phase": "Waiting for the instances to become active"}
    state = observe(cluster(**status), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("False", "PrimaryNotReady")


def test_a_phase_that_needs_a_person() -> None:
    status = {**HEALTHY, "phase": "Cluster has incomplete or invalid image catalog",
              "phaseReason": "no image for major version 17", "conditions": ready("False")}
    state = observe(cluster(**status), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("False", "ClusterFailed")
    assert "no image for major version 17" in state.condition.message


def test_a_spec_change_not_yet_acted_on_reads_degraded_while_writes_go_on() -> None:
    state = observe(cluster(generation=2, **HEALTHY), name=NAME)
    assert (state.condition.status, state.condition.reason) == ("True", "ClusterDegraded")
