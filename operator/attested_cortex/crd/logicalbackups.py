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

from pydantic import ConfigDict, Field, JsonValue

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


#: ``spec.restore`` may be neither added, removed nor changed once the cortex exists: an
#: import runs once, into the empty database the cortex was created with (ADR 0052).
RESTORE_IMMUTABLE: Final[dict[str, JsonValue]] = {
    "rule": "has(self.restore) == has(oldSelf.restore) && "
            "(!has(self.restore) || self.restore == oldSelf.restore)",
    "message": "spec.restore is immutable: a cortex is restored once, when it is created",
}
#: A logical restore and a physical recovery would both fill the one database.
RESTORE_ALONE: Final[dict[str, JsonValue]] = {
    "rule": "!has(self.restore) || !has(self.restore.logical) || "
            "!has(self.database.cloudNativePG) || !has(self.database.cloudNativePG.bootstrap) "
            "|| !has(self.database.cloudNativePG.bootstrap.recovery)",
    "message": "restore.logical and database.cloudNativePG.bootstrap.recovery are exclusive: "
               "a new cortex is restored from one source",
}


class RestoreSigner(CrdModel):
    """The only key whose signature of a bundle's manifest a restore accepts: the source
    cortex's audit signer (ADR 0064). One of ``keyId`` or ``secretRef``."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.keyId) != has(self.secretRef)",
        "message": "restore.logical.signer needs exactly one of keyId or secretRef",
    }]})

    key_id: str | None = Field(
        default=None, description="The signer's key id: the SHA-256 (lowercase hex) of its "
        "raw public key (the 'fingerprint' of its Secret, the key_fingerprint of a bundle's "
        "manifest.sig.json).", min_length=64, max_length=64, pattern=r"^[0-9a-f]{64}$")
    secret_ref: LocalObjectReference | None = Field(
        default=None, description="A Secret in this namespace with the signer's public.pem: "
        "the source cortex's audit signer Secret (<source>-audit-signer), or a copy of its "
        "public.pem alone. Only that key of the Secret is mounted into the import Job.")


class LogicalRestoreSpec(CrdModel):
    """A logical bundle in an object store (one a ``spec.backup.logical`` wrote, or
    ``cortexctl export --to``) that a new cortex is made from."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.objectStore.path) || has(self.sourceCortex)",
        "message": "restore.logical needs objectStore.path or sourceCortex (whose backups "
                   "lie under <namespace>/<sourceCortex>)",
    }]})

    object_store: LogicalObjectStore = Field(
        description="The bucket the bundles are in (the source's spec.backup.logical."
        "objectStore); its path is the folder of the source's backups.")
    source_cortex: str | None = Field(
        default=None, description="The MemoryCortex whose logical backups these are (it may "
        "be gone): the folder is <namespace>/<sourceCortex> when objectStore.path is absent.",
        min_length=1, max_length=50, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    bundle: str = Field(
        default="latest",
        description="The bundle's folder name (e.g. 20261202T030000.123456Z), or latest: "
        "the newest complete bundle under the path.",
        min_length=1, max_length=64, pattern=r"^(latest|[0-9]{8}T[0-9]{6}(\.[0-9]{1,6})?Z)$")
    require_signature: bool = Field(
        default=False,
        description="Refuse a bundle whose manifest is not signed (by the source's audit "
        "signer). The import always verifies every digest, the chain and every signature "
        "under the bundle's own keys; the verification Job then checks the rows with this "
        "cortex's keys.")
    signer: RestoreSigner | None = Field(
        default=None, description="Pin the source's audit signer: the manifest must be signed "
        "by exactly this key (implies requireSignature). A bundle signed by any other key is "
        "refused naming both key ids, and the cortex never serves it (DataVerified=False).")


class RestoreSection(CrdModel):
    """Where a new cortex's data comes from when it is not a CloudNativePG recovery."""

    logical: LogicalRestoreSpec | None = Field(
        default=None,
        description="Import a logical bundle into the new, empty database (every database "
        "mode); the cortex serves only after the import and the verification Job passed "
        "(DataVerified).")
