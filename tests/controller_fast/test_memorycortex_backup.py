"""Backups and the verified restore of a cloudNativePG cortex, whole passes in memory:
the ScheduledBackup applied once the database is ready, BackupHealthy and status.backup from
the Cluster and its Backups (a failing object store is a Warning and the cortex keeps its
server; the section removed takes them with it), and a restored cortex whose server exists
only after its verification Job passed (a verifier that could not run is retried, a verdict
on the data is final: ADR 0054)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.controller.versions import newest_schema_version
from attested_cortex.crd.backups import BackupStatus
from attested_cortex.kubeclient import ApiNotFoundError
from tests.controller_fast.conftest import Operated, cortex, job_finished, server_rolled

KIND = "MemoryCortex"
CNPG = "postgresql.cnpg.io/v1"
STORE = {"endpoint": "http://minio.backups:9000", "bucket": "bkp",
         "credentialsSecretRef": {"name": "s3"}}
BACKED_UP = {"cloudNativePG": {"instances": 1, "backup": {"objectStore": STORE}}}
RESTORED = {"cloudNativePG": {"instances": 1, "bootstrap": {"recovery": {
    "objectStore": STORE, "sourceCortex": "src", "targetTime": "2026-12-02T12:00:00Z"}}}}
Object = dict[str, Any]


def cluster_healthy(op: Operated, name: str, **extra: Any) -> None:
    """The Cluster runs, as CloudNativePG reports it, with the application Secret it made."""
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-db-app"},
              "stringData": {"uri": "postgresql://x"}})
    op.set_status(CNPG, "Cluster", f"{name}-db", {
        "phase": "Cluster in healthy state", "currentPrimary": f"{name}-db-1",
        "targetPrimary": f"{name}-db-1", "instances": 1, "readyInstances": 1,
        "instancesStatus": {"healthy": [f"{name}-db-1"]},
        "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady",
                        "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z"},
                       *extra.pop("conditions", [])], **extra})


def backup(op: Operated, name: str, phase: str, stamp: str, **status: Any) -> None:
    op.apply({"apiVersion": CNPG, "kind": "Backup",
              "metadata": {"name": name, "labels": {"cnpg.io/cluster": "src-db"},
                           "creationTimestamp": stamp},
              "spec": {"cluster": {"name": "src-db"}}})
    op.set_status(CNPG, "Backup", name, {"phase": phase, **status})


async def test_backups_scheduled_and_reported(op: Operated) -> None:
    op.apply(cortex("src", database=BACKED_UP))
    await op.reconcile(KIND, "src")
    assert op.get("ScheduledBackup", "src-db", CNPG) is None  # not before the database
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("False", "BackupPending")

    cluster_healthy(op, "src")
    await op.reconcile(KIND, "src")
    scheduled = op.get("ScheduledBackup", "src-db", CNPG)
    assert scheduled is not None and scheduled["spec"]["cluster"] == {"name": "src-db"}
    assert scheduled["metadata"]["ownerReferences"][0]["name"] == "src"

    backup(op, "src-db-1", "completed", "2026-12-02T10:05:00Z",
           stoppedAt="2026-12-02T10:06:00Z")
    cluster_healthy(op, "src", firstRecoverabilityPoint="2026-12-02T10:06:00Z", conditions=[{
        "type": "ContinuousArchiving", "status": "True", "reason": "ContinuousArchivingSuccess",
        "message": "Continuous archiving is working", "lastTransitionTime":
        "2026-12-02T10:01:00Z"}])
    await op.reconcile(KIND, "src")
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("True", "BackupsSucceeding")
    # Issue 38: how far the archive reaches is in the status, and is a spec choice (RPO).
    assert op.status(KIND, "src")["backup"] == {
        "lastSuccessfulBackup": "2026-12-02T10:06:00Z", "lastBackupName": "src-db-1",
        "firstRecoverabilityPoint": "2026-12-02T10:06:00Z", "completed": 1,
        "archiveTimeoutSeconds": 60, "walArchivingSince": "2026-12-02T10:01:00Z"}
    assert "reaches every write older than 60 s" in op.condition(
        KIND, "src", "BackupHealthy")["message"]
    cluster = op.get("Cluster", "src-db", CNPG)
    assert cluster is not None
    assert cluster["spec"]["postgresql"]["parameters"]["archive_timeout"] == "60s"

    calls = len(op.writer.calls)
    await op.reconcile(KIND, "src")  # nothing new: no status write, no event
    assert ("apply", KIND, "status") not in op.writer.calls[calls:]
    assert ("create", "Event", "") not in op.writer.calls[calls:]


async def serving_with_a_backup(op: Operated) -> None:
    """Cortex ``src`` Ready on its Cluster, one base backup completed."""
    op.apply(cortex("src", database=BACKED_UP))
    await op.reconcile(KIND, "src")
    cluster_healthy(op, "src")
    await op.reconcile(KIND, "src")
    job_finished(op, n.job_name("src", newest_schema_version()))
    await op.reconcile(KIND, "src")
    server_rolled(op, "src")
    backup(op, "src-db-1", "completed", "2026-12-02T10:05:00Z",
           stoppedAt="2026-12-02T10:06:00Z")
    await op.reconcile(KIND, "src")


async def test_a_failing_object_store_warns_and_the_cortex_keeps_serving(op: Operated) -> None:
    await serving_with_a_backup(op)
    assert op.reasons(KIND, "src")["Ready"] == ("True", "CortexReady")

    unreachable = "could not connect to the endpoint URL: http://minio.backups:9000/bkp"
    backup(op, "src-db-2", "failed", "2026-12-02T11:00:00Z", error=unreachable)
    cluster_healthy(op, "src", conditions=[{
        "type": "ContinuousArchiving", "status": "False", "reason": "ContinuousArchivingFailing",
        "message": unreachable, "lastTransitionTime": "2026-12-02T11:00:00Z"}])
    assert await op.reconcile(KIND, "src") is not None  # Backups are not watched: it looks
    failing = op.condition(KIND, "src", "BackupHealthy")
    assert (failing["status"], failing["reason"]) == ("False", "ArchivingFailing")
    assert unreachable in failing["message"] and "s3://bkp/" in failing["message"]
    assert op.status(KIND, "src")["backup"]["lastFailure"] == {
        "backup": "src-db-2", "time": "2026-12-02T11:00:00Z", "reason": unreachable}
    assert op.reasons(KIND, "src")["Ready"] == ("True", "CortexReady")
    assert op.events(KIND, "src")[-1] == ("Warning", "ArchivingFailing")
    assert op.get("Deployment", "src-server", "apps/v1") is not None

    backup(op, "src-db-3", "failed", "2026-12-02T12:00:00Z", error=unreachable)
    await op.reconcile(KIND, "src")  # a second failure: the condition stays, an event says so
    assert op.events(KIND, "src")[-1] == ("Warning", "BackupFailed")

    op.apply(cortex("src", database={"cloudNativePG": {"instances": 1}}))  # backups dropped
    await op.reconcile(KIND, "src")
    assert op.get("ScheduledBackup", "src-db", CNPG) is None
    assert "BackupHealthy" not in op.reasons(KIND, "src")  # no stale condition is left
    assert "backup" not in op.status(KIND, "src")
    assert op.reasons(KIND, "src")["Ready"] == ("True", "CortexReady")
    calls = len(op.writer.calls)
    await op.reconcile(KIND, "src")  # and then nothing more to write
    assert ("apply", KIND, "status") not in op.writer.calls[calls:]
    assert ("delete", "ScheduledBackup", "") not in op.writer.calls[calls:]


async def test_a_failover_is_no_backup_failure(op: Operated) -> None:
    """Issue 38, as recorded on the real node: the primary moves (PrimaryChanging), then the
    old primary's archiver refuses ("switchover in progress") after the new one took over,
    then archiving works again. BackupHealthy stays True throughout, and no Warning is
    posted (the Ready transitions are Normal)."""
    await serving_with_a_backup(op)
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("True", "BackupsSucceeding")
    seen = len(op.events(KIND, "src"))

    cluster_healthy(op, "src", phase="Failing over", targetPrimary="src-db-2")
    await op.reconcile(KIND, "src")
    assert op.reasons(KIND, "src")["DatabaseReady"] == ("False", "PrimaryChanging")
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("True", "BackupsSucceeding")

    just_now = datetime.now(UTC).isoformat()
    moved = {"currentPrimary": "src-db-2", "targetPrimary": "src-db-2",
             "instancesStatus": {"healthy": ["src-db-2"]}}
    cluster_healthy(op, "src", **moved, conditions=[{
        "type": "ContinuousArchiving", "status": "False", "reason": "ContinuousArchivingFailing",
        "message": "switchover in progress, refusing archiving",
        "lastTransitionTime": just_now}])
    await op.reconcile(KIND, "src")
    assert op.reasons(KIND, "src")["Ready"] == ("True", "CortexReady")
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("True", "BackupsSucceeding")

    cluster_healthy(op, "src", **moved, conditions=[{
        "type": "ContinuousArchiving", "status": "True", "reason": "ContinuousArchivingSuccess",
        "message": "Continuous archiving is working", "lastTransitionTime": just_now}])
    await op.reconcile(KIND, "src")
    assert op.reasons(KIND, "src")["BackupHealthy"] == ("True", "BackupsSucceeding")
    assert [e for e in op.events(KIND, "src")[seen:] if e[0] == "Warning"] == []


def verify_pod(op: Operated, name: str, summary: Object | None, exit_code: int = 0,
               pod: str = "x") -> None:
    """The verification Job's pod, terminated with the exit code and the summary the CLI
    wrote (None: killed before it wrote one)."""
    job = f"{name}-verify-restore"
    op.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{job}-{pod}", "labels": {"job-name": job},
        "creationTimestamp": datetime.now(UTC).isoformat()}, "spec": {}})
    ended: Object = {"exitCode": exit_code}
    if summary is not None:
        ended["message"] = json.dumps(summary)
    op.set_status("v1", "Pod", f"{job}-{pod}", {"containerStatuses": [{
        "name": "verify", "state": {"terminated": ended}}]})


def job_failed(op: Operated, reason: str, message: str, ago_s: float = 0) -> None:
    """The verification Job failed, as the Job controller reports it, ``ago_s`` ago."""
    when = (datetime.now(UTC) - timedelta(seconds=ago_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    op.set_status("batch/v1", "Job", "dst-verify-restore", {"conditions": [{
        "type": "Failed", "status": "True", "reason": reason, "message": message,
        "lastTransitionTime": when}]})


async def restored_up_to_verification(op: Operated) -> None:
    op.apply(cortex("dst", database=RESTORED))
    await op.reconcile(KIND, "dst")
    cluster = op.get("Cluster", "dst-db", CNPG)
    assert cluster is not None and cluster["spec"]["bootstrap"]["recovery"]["source"] == "origin"
    cluster_healthy(op, "dst")
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-verify-restore", "batch/v1") is None  # not before the schema
    job_finished(op, n.job_name("dst", newest_schema_version()))
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-verify-restore", "batch/v1") is not None
    assert op.reasons(KIND, "dst")["DataVerified"] == ("False", "Verifying")
    assert op.get("Deployment", "dst-server", "apps/v1") is None


async def test_a_restore_serves_only_once_verified(op: Operated) -> None:
    await restored_up_to_verification(op)
    summary = {"ok": True, "events": 42, "head_hash": "ab12", "last_event": 42,
               "last_event_at": "2026-12-02T11:59:58+00:00",
               "signatures_checked": 40, "unverified": 2, "memories": 20, "links": 7,
               "transcripts": 3, "mismatch_count": 0, "first_mismatch": None}
    verify_pod(op, "dst", summary)
    job_finished(op, "dst-verify-restore")
    await op.reconcile(KIND, "dst")
    verified = op.condition(KIND, "dst", "DataVerified")
    assert (verified["status"], verified["reason"]) == ("True", "Verified")
    assert "20 memories, 7 links, 3 transcripts" in verified["message"]
    assert ("from event 1 to 42 (the last event kept, hash ab12, written at "
            "2026-12-02T11:59:58+00:00: the point the restore reached)") in verified["message"]
    assert op.status(KIND, "dst")["restore"] == {
        "verified": True, "job": "dst-verify-restore", "events": 42, "memories": 20,
        "links": 7, "transcripts": 3, "signaturesChecked": 40, "lastEvent": 42,
        "headHash": "ab12", "reachedAt": "2026-12-02T11:59:58+00:00"}
    assert op.get("Deployment", "dst-server", "apps/v1") is not None

    op.cluster.delete("batch/v1", "Job", "ns", "dst-verify-restore")  # its TTL ran out
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-verify-restore", "batch/v1") is None  # never verified twice
    assert op.reasons(KIND, "dst")["DataVerified"] == ("True", "Verified")


async def test_the_verifier_checks_the_keyed_chain_with_the_cortexs_master_key(
        op: Operated) -> None:
    """The Job mounts the master key Secret the same pass made (ADR 0066), so an event the
    database role appended without the key is a verdict, and the MACs checked are shown."""
    await restored_up_to_verification(op)
    assert op.get("Secret", "dst-master-key", "v1") is not None
    job = op.get("Job", "dst-verify-restore", "batch/v1")
    assert job is not None
    pod = job["spec"]["template"]["spec"]
    assert {"name": "master-key", "secret": {"secretName": "dst-master-key",
                                             "defaultMode": 0o440}} in pod["volumes"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--master-key-dir") + 1] == "/var/run/cortex/master-key"
    mismatch = "event 17: unkeyed_event"
    verify_pod(op, "dst", {"ok": False, "events": 42, "head_hash": "ab12", "last_event": 42,
                           "signatures_checked": 40, "unverified": 2, "macs_checked": 16,
                           "memories": 20, "links": 7, "transcripts": 3, "mismatch_count": 0,
                           "first_mismatch": mismatch}, exit_code=1)
    job_failed(op, "PodFailurePolicy", "Container verify for pod ns/dst-verify-restore-x "
               "failed with exit code 1 matching FailJob rule at index 0")
    await op.reconcile(KIND, "dst")
    assert op.reasons(KIND, "dst")["DataVerified"] == ("False", "RestoreNotVerified")
    restore = op.status(KIND, "dst")["restore"]
    assert (restore["macsChecked"], restore["firstMismatch"]) == (16, mismatch)
    assert op.get("Deployment", "dst-server", "apps/v1") is None


async def test_a_restore_that_does_not_verify_never_serves(op: Operated) -> None:
    await restored_up_to_verification(op)
    mismatch = "memory 0193a: differs_from_record (content) [event 17]"
    verify_pod(op, "dst", {"ok": False, "events": 42, "head_hash": "ab12", "last_event": 42,
                           "signatures_checked": 40, "unverified": 2, "memories": 20,
                           "links": 7, "transcripts": 3, "mismatch_count": 1,
                           "first_mismatch": mismatch}, exit_code=1)
    job_failed(op, "PodFailurePolicy", "Container verify for pod ns/dst-verify-restore-x "
               "failed with exit code 1 matching FailJob rule at index 0")
    await op.reconcile(KIND, "dst")
    failed = op.condition(KIND, "dst", "DataVerified")
    assert (failed["status"], failed["reason"]) == ("False", "RestoreNotVerified")
    assert mismatch in failed["message"]
    assert op.reasons(KIND, "dst")["Ready"] == ("False", "RestoreNotVerified")
    assert op.status(KIND, "dst")["restore"]["firstMismatch"] == mismatch
    assert op.get("Deployment", "dst-server", "apps/v1") is None
    assert ("Warning", "RestoreNotVerified") in op.events(KIND, "dst")


async def test_a_verifier_that_could_not_run_is_retried_and_never_serves_meanwhile(
    op: Operated,
) -> None:
    await restored_up_to_verification(op)
    job = op.get("Job", "dst-verify-restore", "batch/v1") or {}
    rules = job["spec"]["podFailurePolicy"]["rules"]  # exit 1 is final; evictions do not count
    assert rules[0]["onExitCodes"]["values"] == [1] and rules[0]["action"] == "FailJob"
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                "status": "True"}]}
    unreachable = {"ok": False, "error": "the database at dst-db-rw:5432 did not answer "
                   "within 60 s"}
    verify_pod(op, "dst", unreachable, exit_code=2)
    job_failed(op, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    wait = await op.reconcile(KIND, "dst")
    pending = op.condition(KIND, "dst", "DataVerified")
    assert (pending["status"], pending["reason"]) == ("False", "VerificationError")
    assert "(attempt 1): the database at dst-db-rw:5432 did not answer" in pending["message"]
    assert op.reasons(KIND, "dst")["Ready"] == ("False", "VerificationError")
    assert ("Warning", "VerificationError") in op.events(KIND, "dst")
    restore = op.status(KIND, "dst")["restore"]
    assert restore["attempts"] == 1 and "verified" not in restore and restore["retryAt"]
    assert wait is not None and 25 < wait <= 30  # the first retry after 30 s
    assert op.get("Job", "dst-verify-restore", "batch/v1") is not None  # kept until then
    assert op.get("Deployment", "dst-server", "apps/v1") is None

    job_failed(op, "BackoffLimitExceeded", "Job has reached the specified backoff limit",
               ago_s=31)  # the retry is due
    await op.reconcile(KIND, "dst")
    assert op.get("Job", "dst-verify-restore", "batch/v1") is None
    op.cluster.delete("v1", "Pod", "ns", "dst-verify-restore-x")  # its pods go with it
    await op.reconcile(KIND, "dst")
    second = op.get("Job", "dst-verify-restore", "batch/v1") or {}
    assert second["metadata"]["annotations"]["cortex.attested.dev/verification-attempt"] == "2"
    assert op.reasons(KIND, "dst")["DataVerified"] == ("False", "Verifying")

    job_failed(op, "DeadlineExceeded", "Job was active longer than specified deadline")
    await op.reconcile(KIND, "dst")  # killed at its deadline, no report: not a verdict either
    again = op.condition(KIND, "dst", "DataVerified")
    assert (again["reason"], op.status(KIND, "dst")["restore"]["attempts"]) == (
        "VerificationError", 2)
    assert "Job was active longer than specified deadline" in again["message"]
    assert op.events(KIND, "dst").count(("Warning", "VerificationError")) == 2

    job_failed(op, "DeadlineExceeded", "Job was active longer than specified deadline",
               ago_s=61)  # the second retry waits 60 s
    await op.reconcile(KIND, "dst")
    await op.reconcile(KIND, "dst")
    verify_pod(op, "dst", {"ok": True, "events": 5, "head_hash": "ab", "last_event": 5,
                           "signatures_checked": 5, "unverified": 0, "memories": 2,
                           "links": 0, "transcripts": 0}, pod="y")
    job_finished(op, "dst-verify-restore")
    await op.reconcile(KIND, "dst")
    assert op.reasons(KIND, "dst")["DataVerified"] == ("True", "Verified")
    assert op.status(KIND, "dst")["restore"]["verified"] is True
    assert op.get("Deployment", "dst-server", "apps/v1") is not None


async def test_the_archives_reach_is_read_from_the_primary(op: Operated) -> None:
    """Issue 38 item 4: ``status.backup`` says how far the archive reaches, from the
    primary's instance manager (``/pg/status`` through the API server's proxy, ADR 0110),
    looked at again every archiveTimeoutSeconds; a pass that finds it unchanged writes
    nothing, and an answer it cannot get leaves the fields out."""
    answers = [{"isPrimary": True, "currentLsn": "0/5000148",
                "lastArchivedWAL": "000000010000000000000004",
                "lastArchivedWALTime": "2026-12-05T01:20:07.123456Z"}]
    asked: list[tuple[str, str, int, str]] = []

    async def proxy_get(namespace: str, pod: str, scheme: str, port: int, path: str) -> str:
        asked.append((pod, scheme, port, path))
        return json.dumps(answers[-1])
    op.writer.proxy_get = proxy_get  # type: ignore[method-assign]
    await serving_with_a_backup(op)
    cluster_healthy(op, "src", conditions=[{
        "type": "ContinuousArchiving", "status": "True", "reason": "ContinuousArchivingSuccess",
        "message": "Continuous archiving is working", "lastTransitionTime":
        "2026-12-02T10:01:00Z"}])
    wait = await op.reconcile(KIND, "src")
    assert asked[-1] == ("src-db-1", "https", 8000, "/pg/status")
    shown = op.status(KIND, "src")["backup"]
    assert {k: shown[k] for k in ("lastArchivedWAL", "lastArchivedLSN", "unarchivedBytes",
                                  "latestRestorePoint")} == {
        "lastArchivedWAL": "000000010000000000000004", "lastArchivedLSN": "0/5000000",
        "unarchivedBytes": 0x148, "latestRestorePoint": "2026-12-05T01:20:07.123456Z"}
    assert wait is not None and wait <= 60  # the archive's end moves: looked at again
    BackupStatus.model_validate(shown)  # the CRD's field names (its schema prunes others)

    changes = op.cluster.changes
    await op.reconcile(KIND, "src")
    assert op.cluster.changes == changes  # the same reach: nothing written

    answers.append({**answers[0], "currentLsn": "0/6000000",
                    "lastArchivedWAL": "000000010000000000000005",
                    "lastArchivedWALTime": "2026-12-05T01:21:07Z"})
    await op.reconcile(KIND, "src")
    assert op.status(KIND, "src")["backup"]["unarchivedBytes"] == 0

    async def gone(namespace: str, pod: str, scheme: str, port: int, path: str) -> str:
        raise ApiNotFoundError(404, "pods src-db-1 not found")
    op.writer.proxy_get = gone  # type: ignore[method-assign]
    await op.reconcile(KIND, "src")
    assert "lastArchivedWAL" not in op.status(KIND, "src")["backup"]
