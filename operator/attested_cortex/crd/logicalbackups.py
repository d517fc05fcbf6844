"""``spec.backup.logical`` and ``status.logicalBackup`` of a MemoryCortex: scheduled logical
backups to an S3-compatible object store, in every database mode (issue 24, ADR 0041).

A CronJob runs ``cortexctl export --to s3://...`` on a schedule and keeps the newest
``retention`` bundles. The object store has the shape of the physical path's
(``spec.database.cloudNativePG.backup.objectStore``: endpoint, bucket, path, a credentials
Secret with ``ACCESS_KEY_ID`` and ``ACCESS_SECRET_KEY``), and the status the field names of
its ``status.backup`` (``lastSuccessfulBackup``, ``lastBackupName``, ``lastFailure {backup,
time, reason}``); it is a field of its own because a CloudNativePG cortex may run both.
Read by ``memorycortex`` and by ``builders/logicalbackups.py``. Pure data.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, JsonValue

from attested_cortex.crd.common import CrdModel, LocalObjectReference

#: A bucket name as S3 allows it (3-63 lowercase letters, digits, dots and dashes).
BUCKET_PATTERN: Final = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
#: Five cron fields (checked in full by the operator, builders/schedules.py).
CRON_PATTERN: Final = r"^\S+ \S+ \S+ \S+ \S+$"
#: The two keys of the credentials Secret (the physical path's, and CloudNativePG's).
ACCESS_KEY_ID: Final = "ACCESS_KEY_ID"
ACCESS_SECRET_KEY: Final = "ACCESS_SECRET_KEY"  # noqa: S105 (a key name, not a secret)


def _time() -> dict[str, JsonValue]:
    return {"format": "date-time"}


class LogicalObjectStore(CrdModel):
    """An S3-compatible bucket (AWS S3, MinIO, Ceph RGW...) and the credentials to reach it."""

    endpoint: str = Field(
        description="The S3 endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com or "
        "http://minio.backups:9000.",
        min_length=1, max_length=1024, pattern=r"^https?://[^\s/]+/?$")
    bucket: str = Field(description="The bucket (it must exist).", min_length=3,
                        max_length=63, pattern=BUCKET_PATTERN)
    path: str | None = Field(
        default=None, description="A key prefix inside the bucket; the bundles go under it, "
        "one folder per run; absent: <namespace>/<cortex name>.",
        max_length=512, pattern=r"^[A-Za-z0-9._/-]*$")
    credentials_secret_ref: LocalObjectReference = Field(
        description="A Secret in the cortex's namespace with the keys ACCESS_KEY_ID and "
        "ACCESS_SECRET_KEY, given to the backup pods as environment variables (never copied "
        "into status, events or arguments).")


class LogicalBackupSpec(CrdModel):
    """A CronJob that exports the whole cortex (a signed, digested bundle) to the store."""

    schedule: str = Field(
        default="0 3 * * *",
        description="When to export: five cron fields, in UTC (default: daily at 03:00).",
        max_length=128, pattern=CRON_PATTERN)
    object_store: LogicalObjectStore = Field(description="Where the bundles go.")
    retention: int = Field(
        default=7, ge=1, le=1000,
        description="How many complete bundles are kept: older ones are deleted after each "
        "export.")
    suspend: bool = Field(default=False,
                          description="Pause the schedule; bundles already stored stay.")


class BackupSection(CrdModel):
    """Backups that work in every database mode."""

    logical: LogicalBackupSpec | None = Field(
        default=None,
        description="Logical backups: a scheduled export to an S3-compatible object store; "
        "absent: none.")


class LogicalBackupFailure(CrdModel):
    """The last run that failed, and why."""

    backup: str | None = Field(default=None, description="The failed run's Job.",
                               max_length=253)
    time: str | None = Field(default=None, description="When it failed.", max_length=40,
                             json_schema_extra=_time())
    reason: str = Field(description="What the export said (or the Job, when it said "
                        "nothing).", max_length=1024)


class LogicalBackupStatus(CrdModel):
    """Where the cortex's logical backups stand."""

    last_successful_backup: str | None = Field(
        default=None, description="When the last run that succeeded completed.",
        max_length=40, json_schema_extra=_time())
    last_backup_name: str | None = Field(
        default=None, description="The Job of that run.", max_length=253)
    last_failure: LogicalBackupFailure | None = Field(
        default=None, description="The last run that failed, if any (kept after a later "
        "success).")
