"""The verified restore's pure half (builders/verification.py) and the reading of backups
(builders/backupstates.py): literals in, Job, condition and status out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from attested_cortex.builders import backupstates, verification
from attested_cortex.cli.audit import summary
from tests.builders.specs import CORTEX, DEFAULTS, assert_child_metadata, assert_restricted, cortex

STORE = {"endpoint": "http://minio:9000", "bucket": "bkp", "credentialsSecretRef": {"name": "s3"}}
RESTORED = cortex({"database": {"cloudNativePG": {"bootstrap": {"recovery": {
    "objectStore": STORE, "sourceCortex": "src"}}}}})


def test_only_a_restored_cortex_is_verified() -> None:
    assert verification.restores_data(RESTORED)
    assert not verification.restores_data(cortex())
    assert not verification.restores_data(cortex({"database": {"cloudNativePG": {}}}))


def test_the_job_runs_the_deep_audit_with_the_servers_keys() -> None:
    job = verification.build_verification_job(RESTORED, DEFAULTS)
    assert_child_metadata(job, name=f"{CORTEX}-verify-restore", component="migration")
    assert job["spec"]["backoffLimit"] == 2  # a verifier that could not run, not the data
    assert job["metadata"]["annotations"]["cortex.attested.dev/verification-attempt"] == "1"
    pod = job["spec"]["template"]
    assert_restricted(pod)
    (container,) = pod["spec"]["containers"]
    assert container["args"] == ["audit", "verify", "--deep", "--keys", "/keys",
                                 "--master-key-dir", "/var/run/cortex/master-key",
                                 "--timeout", "60", "--summary", "/dev/termination-log"]
    assert container["env"] == [{"name": "CORTEX_DATABASE_URL", "valueFrom": {"secretKeyRef": {
        "name": f"{CORTEX}-db-app", "key": "uri"}}}]
    assert pod["spec"]["volumes"][0] == {"name": "keys",
                                         "configMap": {"name": f"{CORTEX}-config"}}
    # The master key ring, read-only, so the keyed chain is checked too (ADR 0066).
    assert pod["spec"]["volumes"][1] == {"name": "master-key", "secret": {
        "secretName": f"{CORTEX}-master-key", "defaultMode": 0o440}}
    assert container["volumeMounts"][1] == {"name": "master-key", "readOnly": True,
                                            "mountPath": "/var/run/cortex/master-key"}


def test_the_cli_summary_names_the_first_mismatch_and_the_last_event() -> None:
    chain = {"ok": True, "events": 9, "head_hash": "h9", "first_bad_sequence": None,
             "reason": None, "signatures_checked": 9, "unverified": 0}
    swept = {"ok": False, "memories": 3, "links": 1, "transcripts": 0, "mismatch_count": 2,
             "mismatches": [{"kind": "memory", "id": "m1", "problem": "differs_from_record",
                             "fields": ["content"], "sequence": 4}], "truncated": True}
    assert summary(chain, swept) == {
        "ok": False, "events": 9, "head_hash": "h9", "last_event": 9, "signatures_checked": 9,
        "unverified": 0, "memories": 3, "links": 1, "transcripts": 0, "mismatch_count": 2,
        "first_mismatch": "memory m1: differs_from_record (content) [event 4]"}
    keyed = {**chain, "keyed": {"checked": True, "keyed_from": 1, "macs_checked": 9}}
    assert summary(keyed, None)["macs_checked"] == 9
    assert "macs_checked" not in summary({**chain, "keyed": {"checked": False}}, None)
    other_key = {**chain, "ok": False, "first_bad_sequence": 1, "reason": "bad_mac",
                 "keyed": {"checked": True, "keyed_from": 1, "macs_checked": 0}}
    assert summary(other_key, None)["first_mismatch"].startswith(
        "event 1: bad_mac (no MAC verifies: is the master key Secret the one")
    broken = {**chain, "ok": False, "events": 3, "first_bad_sequence": 4,
              "reason": "prev_hash_mismatch"}
    assert summary(broken, None)["first_mismatch"] == "event 4: prev_hash_mismatch"
    assert summary(broken, None)["last_event"] is None


def test_only_a_mismatch_reported_with_exit_1_is_a_verdict_on_the_data() -> None:
    mismatch = {"ok": False, "first_mismatch": "memory m1: changed", "mismatch_count": 1}
    assert verification.data_failed(1, mismatch)
    assert not verification.data_failed(2, {"ok": False, "error": "database unreachable"})
    assert not verification.data_failed(1, {"ok": False, "error": "keys unreadable"})
    assert not verification.data_failed(137, mismatch)  # killed: the summary is not its end
    assert not verification.data_failed(None, None)  # evicted before it wrote anything
    verdict = verification.could_not_verify("j", 3, "database unreachable",
                                            "2026-12-02T12:00:00Z")
    assert (verdict.condition.status, verdict.condition.reason) == ("False",
                                                                   "VerificationError")
    assert verdict.restore == {"job": "j", "attempts": 3, "lastError": "database unreachable",
                               "retryAt": "2026-12-02T12:00:00Z"}
    assert [verification.retry_delay(n) for n in (1, 2, 3, 6, 9)] == [30, 60, 120, 600, 600]
    assert verification.parse_summary("Traceback ...") is None


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def backup(name: str, phase: str, created: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created},
            "status": {"phase": phase, **status}}


def test_backups_first_match_wins() -> None:
    done = backup("b1", "completed", "2026-12-01T03:00:00Z", stoppedAt="2026-12-01T03:01:00Z")
    failed = backup("b2", "failed", "2026-12-02T03:00:00Z", error="AccessDenied")
    cluster = {"status": {"firstRecoverabilityPoint": "2026-12-01T03:01:00Z"}}
    state = backupstates.observe(cluster, [done, failed], destination="s3://bkp/",
                                 before={"lastFailure": {"backup": "b0", "reason": "x"}},
                                 now=NOW)
    assert (state.condition.status, state.condition.reason) == ("False", "BackupFailed")
    assert state.condition.message == "Backup b2 to s3://bkp/ failed: AccessDenied"
    assert state.new_failure == {"backup": "b2", "time": "2026-12-02T03:00:00Z",
                                 "reason": "AccessDenied"}
    state = backupstates.observe(cluster, [done], destination="s3://bkp/", before=None,
                                 now=NOW)
    assert (state.condition.status, state.condition.reason) == ("True", "BackupsSucceeding")
    assert state.new_failure is None
    pending = backupstates.observe({}, [backup("b3", "running", "t")], destination="s3://bkp/",
                                   before=None, now=NOW)
    assert pending.condition.reason == "BackupPending"
    assert "Backup b3 is running" in pending.condition.message


def _archiving(message: str, false_since: datetime) -> dict[str, Any]:
    return {"status": {"conditions": [{
        "type": "ContinuousArchiving", "status": "False", "reason": "ContinuousArchivingFailing",
        "message": message, "lastTransitionTime": false_since.isoformat()}]}}


def test_a_retrying_archiver_is_failing_only_after_its_grace() -> None:
    """Issue 38: the old primary's refusal during a failover is never a failure; any other
    refusal counts once it has lasted ARCHIVE_GRACE_S (the condition's own stamp)."""
    done = backup("b1", "completed", "2026-12-01T03:00:00Z", stoppedAt="2026-12-01T03:01:00Z")
    old_primary = _archiving("switchover in progress, refusing archiving",
                             NOW - timedelta(hours=1))
    state = backupstates.observe(old_primary, [done], destination="s3://bkp/", before=None,
                                 now=NOW)
    assert (state.condition.status, state.condition.reason) == ("True", "BackupsSucceeding")
    assert "retrying" in state.condition.message and state.recheck_in is None
    fresh = _archiving("could not connect", NOW - timedelta(seconds=20))
    state = backupstates.observe(fresh, [done], destination="s3://bkp/", before=None, now=NOW)
    assert state.condition.status == "True"
    assert state.recheck_in == backupstates.ARCHIVE_GRACE_S - 20
    lasting = _archiving("could not connect",
                         NOW - timedelta(seconds=backupstates.ARCHIVE_GRACE_S + 1))
    state = backupstates.observe(lasting, [done], destination="s3://bkp/", before=None,
                                 now=NOW)
    assert (state.condition.status, state.condition.reason) == ("False", "ArchivingFailing")
    assert state.recheck_in is None
