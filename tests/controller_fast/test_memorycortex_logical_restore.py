"""A new cortex made from a logical bundle (spec.restore.logical), whole passes in memory:
the import Job only after the migration Job, the verification Job only after the import,
the server only after both; the import recorded in status.restore and never run twice; a
refused bundle final (RestoreNotVerified, no verification, no server); a store that could
not be reached ImportFailed, not a verdict on the data."""

from __future__ import annotations

import json
from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.controller.versions import newest_schema_version
from tests.controller_fast.conftest import Operated, cortex, database_runs, job_finished

KIND = "MemoryCortex"
STORE = {"endpoint": "http://minio.backups:9000", "bucket": "bkp",
         "credentialsSecretRef": {"name": "s3"}}
RESTORE = {"logical": {"objectStore": STORE, "sourceCortex": "src"}}
SOURCE = "s3://bkp/ns/src/20261202T030000.000001Z"
Object = dict[str, Any]


def terminated(op: Operated, job: str, container: str, summary: Object) -> None:
    """The Job's pod, terminated with the one-line report the CLI wrote."""
    op.apply({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": f"{job}-x", "labels": {"job-name": job}}, "spec": {}})
    op.set_status("v1", "Pod", f"{job}-x", {"containerStatuses": [{
        "name": container, "state": {"terminated": {"message": json.dumps(summary)}}}]})


async def up_to_the_import(op: Operated) -> None:
    op.apply(cortex("dst", restore=RESTORE))
    await op.reconcile(KIND, "dst")
    database_runs(op, "dst")
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-import-restore", "batch/v1") is None  # not before the schema
    job_finished(op, n.job_name("dst", newest_schema_version()))
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-import-restore", "batch/v1") is not None
    assert op.get("Job", "dst-verify-restore", "batch/v1") is None  # not before the import
    assert op.reasons(KIND, "dst")["DataVerified"] == ("False", "Importing")
    assert op.get("Deployment", "dst-server", "apps/v1") is None


async def test_imported_then_verified_then_served_and_never_imported_twice(
    op: Operated,
) -> None:
    await up_to_the_import(op)
    terminated(op, "dst-import-restore", "import", {
        "ok": True, "source": SOURCE, "already": False, "memories": 20, "links": 7,
        "events": 42, "head_hash": "ab12"})
    job_finished(op, "dst-import-restore")
    await op.reconcile(KIND, "dst")
    assert op.status(KIND, "dst")["restore"] == {"source": SOURCE,
                                                 "importJob": "dst-import-restore"}
    assert op.reasons(KIND, "dst")["DataVerified"] == ("False", "Verifying")
    assert op.get("Deployment", "dst-server", "apps/v1") is None

    op.cluster.delete("batch/v1", "Job", "ns", "dst-import-restore")  # its TTL ran out
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-import-restore", "batch/v1") is None  # recorded: not again

    terminated(op, "dst-verify-restore", "verify", {
        "ok": True, "events": 42, "head_hash": "ab12", "last_event": 42,
        "signatures_checked": 42, "unverified": 0, "memories": 20, "links": 7,
        "transcripts": 1, "mismatch_count": 0, "first_mismatch": None})
    job_finished(op, "dst-verify-restore")
    await op.reconcile(KIND, "dst")
    assert op.reasons(KIND, "dst")["DataVerified"] == ("True", "Verified")
    restore = op.status(KIND, "dst")["restore"]
    assert restore["source"] == SOURCE and restore["verified"] is True
    assert restore["events"] == 42 and restore["importJob"] == "dst-import-restore"
    assert op.get("Deployment", "dst-server", "apps/v1") is not None

    op.cluster.delete("batch/v1", "Job", "ns", "dst-verify-restore")
    calls = len(op.writer.calls)
    await op.reconcile(KIND, "dst")  # decided: no Job, no status write
    assert op.get("Job", "dst-import-restore", "batch/v1") is None
    assert op.get("Job", "dst-verify-restore", "batch/v1") is None
    assert ("apply", KIND, "status") not in op.writer.calls[calls:]


async def test_a_refused_bundle_is_final_and_never_serves(op: Operated) -> None:
    await up_to_the_import(op)
    terminated(op, "dst-import-restore", "import", {
        "ok": False, "refused": True, "source": SOURCE, "code": "digest_mismatch",
        "where": "chunks/memories-000001.copy",
        "message": "digest_mismatch at chunks/memories-000001.copy: sha256 differs"})
    job_finished(op, "dst-import-restore", "Failed", "PodFailurePolicy")
    await op.reconcile(KIND, "dst")
    refused = op.condition(KIND, "dst", "DataVerified")
    assert (refused["status"], refused["reason"]) == ("False", "RestoreNotVerified")
    assert "nothing imported: digest_mismatch at chunks/memories-000001.copy" in (
        refused["message"])
    assert op.reasons(KIND, "dst")["Ready"] == ("False", "RestoreNotVerified")
    assert op.status(KIND, "dst")["restore"]["firstMismatch"] == (
        "digest_mismatch at chunks/memories-000001.copy")
    assert ("Warning", "RestoreNotVerified") in op.events(KIND, "dst")

    op.cluster.delete("batch/v1", "Job", "ns", "dst-import-restore")
    await op.reconcile(KIND, "dst")  # final: not imported again, not verified, not served
    for job in ("dst-import-restore", "dst-verify-restore"):
        assert op.get("Job", job, "batch/v1") is None
    assert op.get("Deployment", "dst-server", "apps/v1") is None


async def test_a_store_out_of_reach_is_not_a_verdict(op: Operated) -> None:
    await up_to_the_import(op)
    terminated(op, "dst-import-restore", "import", {
        "ok": False, "source": None,
        "error": "the object store at s3://bkp/ns/src could not be reached"})
    job_finished(op, "dst-import-restore", "Failed", "BackoffLimitExceeded")
    await op.reconcile(KIND, "dst")
    failed = op.condition(KIND, "dst", "DataVerified")
    assert (failed["status"], failed["reason"]) == ("False", "ImportFailed")
    assert "could not be reached" in failed["message"]
    assert "restore" not in op.status(KIND, "dst")
    assert op.get("Deployment", "dst-server", "apps/v1") is None

    op.cluster.delete("batch/v1", "Job", "ns", "dst-import-restore")  # a person retries
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-import-restore", "batch/v1") is not None


async def test_an_import_under_way_reads_in_progress_with_normal_events(op: Operated) -> None:
    """Importing is progress, like Verifying (builders/reasons.py): not Stalled, no Warning."""
    await up_to_the_import(op)
    reasons = op.reasons(KIND, "dst")
    assert reasons["Ready"] == ("False", "Importing")
    assert reasons["Reconciling"] == ("True", "Importing")
    assert reasons["Stalled"] == ("False", "Importing")
    assert ("Warning", "Importing") not in op.events(KIND, "dst")
    assert ("Normal", "Importing") in op.events(KIND, "dst")
