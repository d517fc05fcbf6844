"""``spec.backup`` and ``status.backup`` of a MemoryCortex: scheduled backups to an
S3-compatible object store (issue 24, docs/backup.md).

``spec.backup.logical`` works in every database mode: a CronJob runs ``cortexctl export
--to s3://...`` on a schedule and keeps the newest ``retention`` bundles (ADR 0041).
``status.backup`` is shared with the physical path of CloudNativePG (the same field names:
``lastSuccessfulTime``, ``lastFailure``). Read by ``memorycortex`` and by
``builders/backups.py``. Pure data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from pydantic import Field

from attested_cortex.crd.common import CrdModel

#: A bucket name as S3 allows it (3-63 lowercase letters, digits, dots and dashes).
BUCKET_PATTERN: Final = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
#: Five cron fields, each of digits, ``*``, ``-``, ``,`` and ``/`` (checked in full by the
#: operator, builders/schedules.py, before it writes the CronJob).
CRON_PATTERN: Final = r"^\S+ \S+ \S+ \S+ \S+$"


class ObjectStoreCredentials(CrdModel):
    """The Secret (same namespace) that holds the store's access key pair."""

    name: str = Field(description="Name of the Secret.", min_length=1, max_length=253)
    access_key_id_key: str = Field(
        default="ACCESS_KEY_ID", description="Key of the access key id in the Secret.",
        min_length=1, max_length=253)
    secret_access_key_key: str = Field(
        default="ACCESS_SECRET_KEY", description="Key of the secret access key in the Secret.",
        min_length=1, max_length=253)


class ObjectStoreSpec(CrdModel):
    """An S3-compatible object store: where backups go."""

    endpoint: str = Field(
        description="The store's URL, http:// or https:// (e.g. https://s3.example.com).",
        max_length=1024, pattern=r"^https?://[^/\s]+/?$")
    bucket: str = Field(description="Bucket (must exist).", pattern=BUCKET_PATTERN)
    path: str = Field(
        default="", description="Folder in the bucket; empty: the cortex's namespace/name.",
        max_length=512, pattern=r"^[A-Za-z0-9._/-]*$")
    region: str | None = Field(default=None, description="The store's region, if it needs one.",
                               max_length=64)
    credentials: ObjectStoreCredentials = Field(
        description="Secret with the access key pair (never copied into status or events).")


class LogicalBackupSpec(CrdModel):
    """A CronJob that exports the whole cortex (a signed, digested bundle) to the store."""

    schedule: str = Field(
        default="0 3 * * *",
        description="When to export, five cron fields in UTC (default: daily at 03:00).",
        max_length=128, pattern=CRON_PATTERN)
    object_store: ObjectStoreSpec = Field(description="Where the bundles go.")
    retention: int = Field(
        default=7, ge=1, le=1000,
        description="How many complete bundles to keep: older ones are deleted after each "
        "export.")
    suspend: bool = Field(default=False,
                          description="Pause the schedule; bundles already stored stay.")


class BackupSpec(CrdModel):
    """Scheduled backups of the cortex's data."""

    logical: LogicalBackupSpec | None = Field(
        default=None,
        description="Logical backups (any database mode): a scheduled export to an "
        "S3-compatible object store; absent: none.")


class BackupFailure(CrdModel):
    """The last backup that failed."""

    time: datetime = Field(description="When it failed.")
    reason: str = Field(description="Machine-readable CamelCase reason.", max_length=128)
    message: str = Field(default="", description="What failed and what to do.",
                         max_length=4096)


class BackupStatus(CrdModel):
    """What the backups achieved (both paths)."""

    last_successful_time: datetime | None = Field(
        default=None, description="When the last backup completed.")
    last_failure: BackupFailure | None = Field(
        default=None, description="The last failed backup (kept after a later success).")
