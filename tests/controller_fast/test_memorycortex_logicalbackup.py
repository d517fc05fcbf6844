"""LogicalBackupHealthy and status.logicalBackup: the CronJob of spec.backup.logical, what
its runs did (a failure names the export's last words, a Warning for each one, the cortex
stays Ready), and the CronJob gone with the section."""

from __future__ import annotations

from attested_cortex.builders import names as n
from tests.controller_fast.conftest import (
    Operated,
    cortex,
    database_runs,
    job_finished,
    server_rolled,
)

KIND = "MemoryCortex"
CRON = n.backup_cronjob_name("mem")
LOGICAL = {"schedule": "0 3 * * *", "retention": 3, "objectStore": {
    "endpoint": "http://minio.backup:9000", "bucket": "backups",
    "credentialsSecretRef": {"name": "s3-keys"}}}


def backed_up() -> dict[str, object]:
    return cortex("mem", backup={"logical": LOGICAL})


async def ready(op: Operated) -> None:
    op.apply(backed_up())
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")


def run(op: Operated, name: str) -> None:
    """The CronJob controller starts a run: a Job from the template's labels."""
    template = (op.get("CronJob", CRON, "batch/v1") or {})["spec"]["jobTemplate"]
    op.apply({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": name, "labels": template["metadata"]["labels"]}, "spec": template["spec"]})


def export_said(op: Operated, job: str, words: str) -> None:
    op.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{job}-x", "labels": {"job-name": job}}, "spec": {"containers": []}})
    op.set_status("v1", "Pod", f"{job}-x", {"containerStatuses": [{"state": {"terminated": {
        "exitCode": 2, "message": words}}}]})


async def test_runs_become_status_and_a_failure_is_a_warning_while_the_cortex_serves(
    op: Operated,
) -> None:
    await ready(op)
    cron = op.get("CronJob", CRON, "batch/v1")
    assert cron is not None and cron["spec"]["schedule"] == "0 3 * * *"
    assert op.reasons(KIND, "mem")["LogicalBackupHealthy"] == ("Unknown", "BackupScheduled")

    run(op, f"{CRON}-1")
    job_finished(op, f"{CRON}-1")
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["LogicalBackupHealthy"] == ("True", "BackupSucceeded")
    success = op.status(KIND, "mem")["logicalBackup"]["lastSuccessfulBackup"]
    assert op.status(KIND, "mem")["logicalBackup"]["lastBackupName"] == f"{CRON}-1"

    for job in (f"{CRON}-2", f"{CRON}-3"):
        run(op, job)
        export_said(op, job, "cortexctl export: the object store at s3://backups/ns/mem "
                             "could not be reached (MaxRetryError)")
        job_finished(op, job, "Failed", "Job has reached the specified backoff limit")
        await op.reconcile(KIND, "mem")
        failed = op.condition(KIND, "mem", "LogicalBackupHealthy")
        assert (failed["status"], failed["reason"]) == ("False", "BackupFailed")
        assert failed["message"].startswith(f"Job {job} failed")
        assert "could not be reached" in failed["message"]
    backup = op.status(KIND, "mem")["logicalBackup"]
    assert backup["lastSuccessfulBackup"] == success
    assert backup["lastFailure"]["backup"] == f"{CRON}-3"
    assert backup["lastFailure"]["reason"].endswith("could not be reached (MaxRetryError)")
    assert op.events(KIND, "mem").count(("Warning", "BackupFailed")) == 2  # one per failure
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")  # still serving

    changes, events = op.cluster.changes, op.events(KIND, "mem")
    await op.reconcile(KIND, "mem")
    assert (op.cluster.changes, op.events(KIND, "mem")) == (changes, events)  # idle: no change


async def test_the_cronjob_condition_and_status_go_with_the_section(op: Operated) -> None:
    await ready(op)
    run(op, f"{CRON}-1")
    job_finished(op, f"{CRON}-1")
    await op.reconcile(KIND, "mem")
    assert "logicalBackup" in op.status(KIND, "mem")
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    assert op.get("CronJob", CRON, "batch/v1") is None
    assert "LogicalBackupHealthy" not in op.reasons(KIND, "mem")  # nothing stale is left
    assert "logicalBackup" not in op.status(KIND, "mem")
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")


async def test_a_schedule_cron_cannot_read_is_refused_without_a_cronjob(op: Operated) -> None:
    op.apply(cortex("mem", backup={"logical": {**LOGICAL, "schedule": "61 * * * *"}}))
    await op.reconcile(KIND, "mem")
    refused = op.condition(KIND, "mem", "LogicalBackupHealthy")
    assert (refused["status"], refused["reason"]) == ("False", "InvalidSchedule")
    assert op.get("CronJob", CRON, "batch/v1") is None
