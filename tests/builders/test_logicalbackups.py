"""The logical backup CronJob of spec.backup.logical, and status.backup read from its Jobs."""

from typing import Any

import pytest

from attested_cortex.builders.logicalbackups import build_logical_backup_cronjob, last_runs
from tests.builders.specs import (
    CORTEX,
    DEFAULTS,
    NAMESPACE,
    assert_child_metadata,
    assert_restricted,
    container,
    cortex,
    env_of,
)

STORE = {"endpoint": "https://s3.example.com", "bucket": "backups",
         "credentialsSecretRef": {"name": "s3-keys"}}


def backed_up(extra: dict[str, Any] | None = None, **spec: Any) -> Any:
    logical = {"objectStore": {**STORE, **(extra or {})}, **spec}
    return cortex({"backup": {"logical": logical}})


def test_the_cronjob_exports_to_the_store_and_keeps_the_newest_bundles() -> None:
    cron = build_logical_backup_cronjob(backed_up(retention=5, schedule="30 2 * * *"), DEFAULTS)
    assert (cron["apiVersion"], cron["kind"]) == ("batch/v1", "CronJob")
    assert_child_metadata(cron, name=f"{CORTEX}-backup", component="backup")
    spec = cron["spec"]
    assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"]) == (
        "30 2 * * *", "Etc/UTC", "Forbid")
    assert spec["suspend"] is False and spec["startingDeadlineSeconds"] == 3600
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 1 and job["activeDeadlineSeconds"] == 6 * 3600
    template = job["template"]
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "backup"
    assert spec["jobTemplate"]["metadata"]["labels"] == template["metadata"]["labels"]
    assert template["spec"]["automountServiceAccountToken"] is False
    assert_restricted(template)
    export = container(template, "export")
    assert export["image"] == DEFAULTS.server_image and export["command"] == ["cortexctl"]
    assert export["args"] == [
        "export", "--to", f"s3://backups/{NAMESPACE}/{CORTEX}", "--retain", "5",
        "--keys", "/var/run/cortex/keys", "--json",
        "--signer", f"cortex:{NAMESPACE}/{CORTEX}"]


def test_credentials_and_the_database_url_come_from_secrets_never_arguments() -> None:
    cron = build_logical_backup_cronjob(backed_up(), DEFAULTS)
    export = container(cron["spec"]["jobTemplate"]["spec"]["template"], "export")
    env = env_of(export)
    assert env["AWS_ENDPOINT_URL"] == {"name": "AWS_ENDPOINT_URL",
                                       "value": "https://s3.example.com"}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"] == {
        "secretKeyRef": {"name": "s3-keys", "key": "ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "s3-keys", "key": "ACCESS_SECRET_KEY"}}
    assert "AWS_REGION" not in env
    assert env["CORTEX_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": f"{CORTEX}-db-credentials", "key": "uri"}}
    assert not any("s3-keys" in a or "postgresql://" in a for a in export["args"])


def test_the_pod_mounts_the_keyring_and_the_audit_signer_read_only() -> None:
    template = build_logical_backup_cronjob(backed_up(), DEFAULTS)["spec"]["jobTemplate"][
        "spec"]["template"]
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["keyring"] == {"name": "keyring", "configMap": {"name": f"{CORTEX}-config"}}
    assert volumes["audit-signer"]["secret"]["secretName"] == f"{CORTEX}-audit-signer"
    mounts = {m["name"]: m for m in container(template, "export")["volumeMounts"]}
    assert mounts["keyring"]["readOnly"] and mounts["audit-signer"]["readOnly"]
    assert mounts["audit-signer"]["mountPath"] == "/var/run/cortex/keys/_audit-signer"


def test_an_explicit_path_and_no_signer() -> None:
    c = cortex({"backup": {"logical": {"objectStore": {**STORE, "path": "/team/a/"}}},
                "audit": {"signer": {"mode": "Off"}}})
    export = container(build_logical_backup_cronjob(c, DEFAULTS)["spec"]["jobTemplate"][
        "spec"]["template"], "export")
    assert export["args"][:3] == ["export", "--to", "s3://backups/team/a"]
    assert "--signer" not in export["args"]


def test_without_the_section_there_is_no_cronjob() -> None:
    with pytest.raises(ValueError, match=r"backup\.logical"):
        build_logical_backup_cronjob(cortex(), DEFAULTS)


def job(name: str, outcome: str, when: str, reason: str = "", message: str = "") -> Any:
    cond = {"type": outcome, "status": "True", "lastTransitionTime": when, "reason": reason,
            "message": message}
    return {"metadata": {"name": name}, "status": {"conditions": [cond]}}


def test_status_from_the_runs_newest_last_and_a_success_is_never_forgotten() -> None:
    runs = last_runs([job("b-2", "Failed", "2026-12-02T03:00:09Z", "BackoffLimitExceeded",
                          "Job has reached the specified backoff limit"),
                      job("b-1", "Complete", "2026-12-01T03:00:07Z"),
                      {"metadata": {"name": "b-3"}, "status": {"active": 1}}], None)
    assert runs.status == {
        "lastSuccessfulBackup": "2026-12-01T03:00:07Z", "lastBackupName": "b-1",
        "lastFailure": {"backup": "b-2", "time": "2026-12-02T03:00:09Z",
                        "reason": "BackoffLimitExceeded: Job has reached the specified "
                                  "backoff limit"}}
    assert runs.newest == ("b-2", False, "BackoffLimitExceeded",
                           "Job has reached the specified backoff limit")
    later = last_runs([job("b-4", "Complete", "2026-12-03T03:00:05Z")], runs.status)
    assert (later.status["lastSuccessfulBackup"], later.status["lastBackupName"]) == (
        "2026-12-03T03:00:05Z", "b-4")
    assert later.status["lastFailure"] == runs.status["lastFailure"]
    assert later.newest is not None and later.newest[:2] == ("b-4", True)
    gone = last_runs([], later.status)  # the history limit removed every Job
    assert gone.status == later.status and gone.newest is None
