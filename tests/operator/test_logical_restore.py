"""A cortex restored from a logical bundle (spec.restore.logical) on the real control plane,
with the chart's RBAC: the API server accepts the import Job as the operator builds it (its
podFailurePolicy included), created only after the migration Job, and neither the
verification Job nor the server before the import reported success. kwok completes Jobs
without the import's report, so the verdicts themselves are tests/controller_fast's and,
with the real commands, tests/bundles/test_objectstore.py's."""

from __future__ import annotations

import pytest
from hack.support.waiting import wait_until

from attested_cortex.controller.versions import newest_schema_version
from tests.operator.conftest import Operated, OperatorProcess, cortex

pytestmark = pytest.mark.kube

STORE = {"endpoint": "http://minio.backups:9000", "bucket": "backups",
         "credentialsSecretRef": {"name": "s3"}}


def test_the_import_job_runs_after_the_schema_and_gates_the_server(
    operated: Operated, operator: OperatorProcess,
) -> None:
    operated.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"},
                    "stringData": {"ACCESS_KEY_ID": "k", "ACCESS_SECRET_KEY": "s"}},
                   cortex("restored", restore={"logical": {"objectStore": STORE,
                                                           "sourceCortex": "notes"}}))
    job = wait_until(lambda: operated.get("job", "restored-import-restore"),
                     what="the import Job", seconds=120, interval_s=0.5)
    migration = operated.get("job", f"restored-migrate-v{newest_schema_version()}") or {}
    assert any(c["type"] == "Complete" and c["status"] == "True"  # the import came after it
               for c in (migration.get("status") or {}).get("conditions") or [])
    spec = job["spec"]
    assert spec["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [1]
    (container,) = spec["template"]["spec"]["containers"]
    assert container["args"][:3] == ["import", "--from", "s3://backups/" + operated.namespace
                                     + "/notes"]
    assert job["metadata"]["ownerReferences"][0]["name"] == "restored"
    verified = operated.wait_condition("MemoryCortex", "restored", "DataVerified", "False",
                                       reason="Importing")
    assert "restored-import-restore" in verified["message"]
    assert operated.get("job", "restored-verify-restore") is None
    assert operated.get("deployment", "restored-server") is None
    assert operated.condition("MemoryCortex", "restored", "Ready")["status"] == "False"

