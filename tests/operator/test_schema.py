"""SchemaReady: the server waits for its migration; a failed migration says why (in status
and an event); a database newer than the build, or a target this build does not know, is
reported and never migrated down."""

from __future__ import annotations

import json

import pytest
from hack.support.kube import FAIL_ANNOTATION, FAIL_MESSAGE_ANNOTATION
from hack.support.waiting import wait_until

from attested_cortex.builders.names import labels
from attested_cortex.controller.versions import newest_schema_version
from tests.operator.conftest import Operated, OperatorProcess, cortex

pytestmark = pytest.mark.kube

NEWER = "the database is at schema version 99, newer than this build supports"


def _external(operated: Operated, name: str, **spec: object) -> None:
    operated.kubectl("create", "secret", "generic", f"{name}-uri",
                     "--from-literal=uri=postgresql://u:p@db.example.invalid/x")
    operated.apply(cortex(name, database={"external": {"secretRef": {"name": f"{name}-uri"}}},
                          **spec))


def _failing_job(operated: Operated, name: str, version: int) -> None:
    """The migration Job as a failing migrate would leave it (kwok fails its pod), labelled
    as the operator labels its Jobs (it watches Jobs by those labels)."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{name}-migrate-v{version}",
                        "labels": labels(name, "migration")},
           "spec": {"backoffLimit": 0, "template": {
               "metadata": {"annotations": {FAIL_ANNOTATION: "true",
                                            FAIL_MESSAGE_ANNOTATION: NEWER}},
               "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "migrate", "image": "attested-cortex/cortex:test"}]}}}}
    operated.kubectl("apply", "-f", "-", input=json.dumps(job))


def test_failed_migration_is_reported_and_the_server_waits(operated: Operated,
                                                           operator: OperatorProcess) -> None:
    _failing_job(operated, "newer", newest_schema_version())
    _external(operated, "newer")
    cond = operated.wait_condition("MemoryCortex", "newer", "SchemaReady", "False",
                                   reason="DatabaseNewerThanBuild")
    assert "newer-migrate-v" in cond["message"] and "schema version 99" in cond["message"]
    ready = operated.condition("MemoryCortex", "newer", "Ready")
    assert ready["status"] == "False" and ready["reason"] == "DatabaseNewerThanBuild"
    assert operated.get("deployment", "newer-server") is None
    events = json.loads(operated.kubectl("get", "events", "--field-selector",
                                         "involvedObject.name=newer", "-o", "json").stdout)
    warnings = [e for e in events["items"] if e["type"] == "Warning"]
    assert any(e["reason"] == "DatabaseNewerThanBuild" for e in warnings), events["items"]


def test_a_target_this_build_does_not_know_is_refused(operated: Operated,
                                                      operator: OperatorProcess) -> None:
    _external(operated, "future", schema={"targetVersion": 99})
    cond = operated.wait_condition("MemoryCortex", "future", "SchemaReady", "False",
                                   reason="TargetVersionUnsupported")
    assert str(newest_schema_version()) in cond["message"]
    assert operated.get("job", "future-migrate-v99") is None


def test_a_lower_target_never_migrates_down(operated: Operated,
                                            operator: OperatorProcess) -> None:
    _external(operated, "down")
    operated.kubectl("wait", "--for=condition=Ready", "mcx/down", "--timeout=120s")
    operated.kubectl("patch", "mcx/down", "--type=merge", "-p",
                     json.dumps({"spec": {"schema": {"targetVersion": 1}}}))
    cond = operated.wait_condition("MemoryCortex", "down", "SchemaReady", "False",
                                   reason="DowngradeRefused")
    assert "never migrates down" in cond["message"]
    assert operated.get("job", "down-migrate-v1") is None
    status = wait_until(lambda: operated.get("MemoryCortex", "down")["status"], what="status",
                        seconds=60, interval_s=0.2)
    assert status["schemaVersion"] == newest_schema_version()
