"""The logical backup CronJob of ``spec.backup.logical``, and the reading of its Jobs. Pure.

Each run is ``cortexctl export --to s3://bucket/path --retain N``: a signed, digested
bundle of the whole cortex in a new folder named by the run's UTC time, then every bundle
but the newest N deleted (ADR 0041). The pod reads the database URL from the connection
Secret (as the migration Job does), the store's key pair from the user's Secret (both as
environment variables, never in arguments), the public keys from the configuration
ConfigMap's keyring files, and the audit signer's key, which signs the manifest. No
ServiceAccount token, restricted Pod Security, one run at a time (``Forbid``).

:func:`last_runs` turns the CronJob's Jobs into ``status.logicalBackup`` (the field names
of the physical path's ``status.backup``). Called by
``controller/memorycortex/logicalbackup.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.builders import configmaps, jobs, names, podparts, security, settings
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.crd.logicalbackups import (
    ACCESS_KEY_ID,
    ACCESS_SECRET_KEY,
    LogicalBackupSpec,
    LogicalObjectStore,
)

Object = dict[str, Any]

KEYS_DIR: Final = configmaps.KEYS_DIR
#: Jobs kept for ``kubectl get jobs`` and for status: the last few of each outcome.
HISTORY: Final = 3
#: One try per run and a bound on it: a run that cannot finish fails, the next one retries.
BACKOFF_LIMIT: Final = 1
DEADLINE_SECONDS: Final = 6 * 3600
#: A run missed by this much (operator or cluster down) is skipped, not run late in a burst.
STARTING_DEADLINE_SECONDS: Final = 3600
SIGNER_FILES: Final = ("agent-id", "private.pem", "public.pem", "fingerprint")


def location(cortex: Cortex, spec: LogicalBackupSpec) -> str:
    """``s3://bucket/path``; the path defaults to the cortex's namespace/name."""
    path = (spec.object_store.path or "").strip("/") or (
        f"{cortex.meta.namespace}/{cortex.meta.name}")
    return f"s3://{spec.object_store.bucket}/{path}"


def object_store_env(cortex: Cortex, store: LogicalObjectStore) -> list[Object]:
    """The database URL and the object store's endpoint and keys, from their Secrets only:
    what the backup CronJob and the logical restore's import Job both run with."""
    secret = store.credentials_secret_ref.name
    return [podparts.database_env(cortex),
            {"name": "AWS_ENDPOINT_URL", "value": store.endpoint.rstrip("/")},
            {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
                "name": secret, "key": ACCESS_KEY_ID}}},
            {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {
                "name": secret, "key": ACCESS_SECRET_KEY}}}]


def _volumes(cortex: Cortex) -> tuple[list[Object], list[Object]]:
    volumes: list[Object] = [
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "keyring", "configMap": {"name": names.config_name(cortex.meta.name)}}]
    mounts: list[Object] = [{"name": "tmp", "mountPath": "/tmp"},
                            {"name": "keyring", "mountPath": f"{KEYS_DIR}/_keyring",
                             "readOnly": True}]
    signer = settings.audit_signer_secret(cortex)
    if signer is not None:
        volumes.append({"name": "audit-signer", "secret": {
            "secretName": signer, "defaultMode": 0o440,
            "items": [{"key": f, "path": f} for f in SIGNER_FILES]}})
        mounts.append({"name": "audit-signer", "readOnly": True,
                       "mountPath": f"{KEYS_DIR}/{settings.AUDIT_SIGNER_SUBDIR}"})
    return volumes, mounts


def _args(cortex: Cortex, spec: LogicalBackupSpec) -> list[str]:
    args = ["export", "--to", location(cortex, spec), "--retain", str(spec.retention),
            "--keys", KEYS_DIR, "--json"]
    signer = settings.audit_signer(cortex)
    return [*args, "--signer", signer] if signer is not None else args


def build_logical_backup_cronjob(cortex: Cortex, defaults: Defaults) -> Object:
    """The CronJob exporting the cortex to ``spec.backup.logical``'s object store."""
    spec = cortex.spec.backup.logical
    if spec is None:
        raise ValueError("spec.backup.logical is not set")
    volumes, mounts = _volumes(cortex)
    container = {
        "name": "export", "image": jobs.cortex_image(cortex, defaults),
        "imagePullPolicy": defaults.image_pull_policy,
        "command": ["cortexctl"], "args": _args(cortex, spec),
        "env": object_store_env(cortex, spec.object_store),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "securityContext": security.container_security(), "volumeMounts": mounts}
    labels = names.labels(cortex.meta.name, "backup")
    pod = {"metadata": {"labels": labels},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": security.pod_security(user=jobs.CORTEX_UID,
                                                             group=jobs.CORTEX_UID),
                    "containers": [container], "volumes": volumes}}
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": names.metadata(names.backup_cronjob_name(cortex.meta.name), cortex.meta,
                                       component="backup"),
            "spec": {"schedule": spec.schedule, "timeZone": "Etc/UTC",
                     "concurrencyPolicy": "Forbid", "suspend": spec.suspend,
                     "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
                     "successfulJobsHistoryLimit": HISTORY, "failedJobsHistoryLimit": HISTORY,
                     "jobTemplate": {"metadata": {"labels": labels}, "spec": {
                         "backoffLimit": BACKOFF_LIMIT,
                         "activeDeadlineSeconds": DEADLINE_SECONDS, "template": pod}}}}


@dataclass(frozen=True)
class Runs:
    """What the finished runs say: ``status.logicalBackup`` and the newest run's outcome."""

    status: Object
    #: The newest finished run: (job name, succeeded, reason, message); None: none yet.
    newest: tuple[str, bool, str, str] | None


def _finished(job: Mapping[str, Any]) -> tuple[str, bool, Mapping[str, Any]] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            when = str(cond.get("lastTransitionTime") or "")
            return when, cond["type"] == "Complete", cond
    return None


def last_runs(jobs_: Iterable[Mapping[str, Any]], current: Mapping[str, Any] | None) -> Runs:
    """``status.logicalBackup`` from the CronJob's Jobs, kept from ``current`` where the Jobs
    are gone (history limits remove old ones: a success is never forgotten). Runs are taken
    oldest first, so the newest of equal times wins."""
    status: Object = dict(current or {})
    finished = sorted(((f, j) for j in jobs_ if (f := _finished(j)) is not None),
                      key=lambda pair: (pair[0][0], str(pair[1]["metadata"]["name"])))
    newest = None
    for (when, ok, cond), job in finished:
        name = str(job["metadata"]["name"])
        reason = str(cond.get("reason") or ("Completed" if ok else "Failed"))
        message = str(cond.get("message") or "")
        if ok and when >= str(status.get("lastSuccessfulBackup") or ""):
            status["lastSuccessfulBackup"], status["lastBackupName"] = when, name
        if not ok and when >= str((status.get("lastFailure") or {}).get("time") or ""):
            status["lastFailure"] = {"backup": name, "time": when,
                                     "reason": f"{reason}: {message}"[:1024]}
        newest = (name, ok, reason, message)
    return Runs(status, newest)
