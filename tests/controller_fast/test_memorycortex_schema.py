"""SchemaReady: one migration Job per target version once the database runs; what a failed
one said; targets this build does not know, or below the database's, refused with no Job."""

from __future__ import annotations

from attested_cortex.builders import names as n
from attested_cortex.controller.memorycortex.schema import LAST_WORDS_RETRY_S
from tests.controller_fast.conftest import (
    API,
    Operated,
    cortex,
    database_runs,
    job_finished,
)

KIND = "MemoryCortex"


def jobs(op: Operated) -> list[str]:
    return [job["metadata"]["name"] for job in op.cluster.list("batch/v1", "Job", "ns")]


async def test_the_schema_migrates_once_the_database_runs(op: Operated) -> None:
    newest = op.rt.defaults.schema_version
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["SchemaReady"] == ("False", "WaitingForDatabase")
    assert jobs(op) == []

    database_runs(op)
    await op.reconcile(KIND, "mem")
    job = n.job_name("mem", newest)
    assert jobs(op) == [job]
    assert op.condition(KIND, "mem", "SchemaReady")["message"] == (
        f"Job {job} is migrating to schema version {newest}")
    assert op.get("Deployment", n.server_name("mem"), "apps/v1") is None  # not before

    job_finished(op, job)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["SchemaReady"] == ("True", "Migrated")
    assert op.status(KIND, "mem")["schemaVersion"] == newest
    assert op.get("Deployment", n.server_name("mem"), "apps/v1") is not None
    assert ("Normal", "Migrating") in op.events(KIND, "mem")


async def test_a_failed_migration_says_what_migrate_said(op: Operated) -> None:
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job = n.job_name("mem", op.rt.defaults.schema_version)
    job_finished(op, job, "Failed", "BackoffLimitExceeded")
    assert await op.reconcile(KIND, "mem") == LAST_WORDS_RETRY_S  # its pod may speak later
    assert op.reasons(KIND, "mem")["SchemaReady"] == ("False", "MigrationFailed")

    op.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{job}-abc", "labels": {"job-name": job}}, "spec": {"containers": []}})
    op.set_status("v1", "Pod", f"{job}-abc", {"containerStatuses": [{"state": {"terminated": {
        "exitCode": 1, "message": "database schema 99 is newer than this build (10)"}}}]})
    assert await op.reconcile(KIND, "mem") is None
    failed = op.condition(KIND, "mem", "SchemaReady")
    assert (failed["status"], failed["reason"]) == ("False", "DatabaseNewerThanBuild")
    assert failed["message"].endswith("migrate said: database schema 99 is newer than this "
                                      "build (10)")
    assert op.events(KIND, "mem")[-1] == ("Warning", "DatabaseNewerThanBuild")


async def test_a_target_this_build_does_not_know_is_refused(op: Operated) -> None:
    newest = op.rt.defaults.schema_version
    op.apply(cortex("mem", schema={"targetVersion": newest + 1}))
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["SchemaReady"] == ("False", "TargetVersionUnsupported")
    assert jobs(op) == []


async def test_the_database_is_never_migrated_down(op: Operated) -> None:
    newest = op.rt.defaults.schema_version
    op.apply(cortex("mem", schema={"targetVersion": newest - 1}))
    op.set_status(API, KIND, "mem", {"schemaVersion": newest})
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    refused = op.condition(KIND, "mem", "SchemaReady")
    assert (refused["status"], refused["reason"]) == ("False", "DowngradeRefused")
    assert f"the database is at schema version {newest}" in refused["message"]
    assert jobs(op) == [] and op.status(KIND, "mem")["schemaVersion"] == newest
