"""``spec.database.cloudNativePG``: a MemoryCortex whose database is a CloudNativePG Cluster.

The fields are the part of CloudNativePG's ``postgresql.cnpg.io/v1`` Cluster a cortex owner
decides (how many instances, how much disk, how many replicas confirm a commit, compute,
PostgreSQL parameters, the image, where its backups go and what it is restored from);
everything else of the Cluster is decided by the operator's builders
(``builders/clusters.py``, ``builders/backups.py``). Read by ``memorycortex`` (the
DatabaseSpec) and by those builders. Pure data.

Backups and restores (issue 24, ADR 0038) use CloudNativePG's in-tree Barman object store:
``backup`` turns on WAL archiving and base backups on a schedule into an S3-compatible
bucket; ``bootstrap.recovery`` makes a **new** cortex's Cluster from such a backup, to its
end or to ``targetTime``. The source's bucket is only read.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, JsonValue

from attested_cortex.crd.common import (
    DNS_LABEL_PATTERN,
    CrdModel,
    LocalObjectReference,
    ResourceRequirements,
    StorageSpec,
    section,
)

SyncMethod = Literal["any", "first"]
DataDurability = Literal["required", "preferred"]

#: PostgreSQL parameters the operator sets itself: shared_preload_libraries carries Apache
#: AGE, synchronous_standby_names is CloudNativePG's rendering of ``synchronous``.
OWNED_PARAMETERS: Final = ("shared_preload_libraries", "synchronous_standby_names")
MAX_PARAMETERS: Final = 64
MAX_PARAMETER_VALUE: Final = 256
#: The keys of the object store's credentials Secret (CloudNativePG's documented names).
ACCESS_KEY_ID: Final = "ACCESS_KEY_ID"
ACCESS_SECRET_KEY: Final = "ACCESS_SECRET_KEY"  # noqa: S105 (a key's name, not a secret)
#: An S3 bucket name (lower case, digits, dots and hyphens, 3 to 63 characters).
BUCKET_PATTERN: Final = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
#: A key prefix inside the bucket: path segments, no leading or trailing slash.
PREFIX_PATTERN: Final = r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
#: CloudNativePG's retention policy: a number of days, weeks or months.
RETENTION_PATTERN: Final = r"^[1-9][0-9]*[dwm]$"
#: Six cron fields, seconds first (CloudNativePG's ScheduledBackup), or a @ descriptor.
SCHEDULE_PATTERN: Final = (r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)"
                           r"|(\S+\s+){5}\S+)$")
#: RFC 3339 with a zone (PostgreSQL's recovery_target_time reads it as it is).
TIME_PATTERN: Final = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                       r"(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:?[0-9]{2})$")


def _owned_parameters_rule() -> dict[str, JsonValue]:
    owned = ", ".join(f"'{p}'" for p in OWNED_PARAMETERS)
    return {"rule": f"!self.exists(k, k in [{owned}])",
            "message": "shared_preload_libraries and synchronous_standby_names are set by the "
                       "operator (Apache AGE is preloaded; use synchronous for synchronous "
                       "replicas): remove them from parameters"}


class SynchronousSpec(CrdModel):
    """Synchronous replication: a commit is acknowledged once replicas have it too."""

    number: int = Field(
        ge=1, le=9,
        description="How many replicas must confirm every commit before the client is "
        "answered (CloudNativePG's spec.postgresql.synchronous.number); less than instances.",
    )
    method: SyncMethod = Field(
        default="any",
        description="any: any `number` of the replicas (quorum); first: the first `number` "
        "replicas in priority order.",
    )
    data_durability: DataDurability = Field(
        default="required",
        description="required: a commit waits while too few replicas are healthy (no "
        "acknowledged write is ever on one copy only); preferred: the required number "
        "shrinks to the healthy replicas, so writes go on when replicas are down.",
    )


class ObjectStore(CrdModel):
    """An S3-compatible bucket (AWS S3, MinIO, Ceph RGW...) and the credentials to reach it."""

    endpoint: str = Field(
        description="The S3 endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com or "
        "http://minio.backups:9000.",
        min_length=1, max_length=1024, pattern=r"^https?://[^\s/]+(/\S*)?$",
    )
    bucket: str = Field(description="The bucket (it must exist).", min_length=3,
                        max_length=63, pattern=BUCKET_PATTERN)
    path: str | None = Field(
        default=None,
        description="A key prefix inside the bucket; the Cluster's backups and WAL go under "
        "<path>/<cluster name>/.",
        max_length=512, pattern=PREFIX_PATTERN,
    )
    credentials_secret_ref: LocalObjectReference = Field(
        description="A Secret in the cortex's namespace with the keys ACCESS_KEY_ID and "
        "ACCESS_SECRET_KEY. Read by CloudNativePG's instances, never by the operator."
    )


class BackupSpec(CrdModel):
    """Continuous WAL archiving and scheduled base backups to an object store."""

    object_store: ObjectStore = Field(description="Where backups and archived WAL go.")
    retention: str = Field(
        default="30d",
        description="How long backups and the WAL they need are kept: a number of days, "
        "weeks or months (30d, 4w, 6m); older ones are deleted by CloudNativePG.",
        max_length=8, pattern=RETENTION_PATTERN,
    )
    schedule: str = Field(
        default="0 0 3 * * *",
        description="When a base backup is taken: six cron fields with seconds first "
        "(CloudNativePG's ScheduledBackup; the default is 03:00 every day).",
        max_length=128, pattern=SCHEDULE_PATTERN,
    )
    archive_timeout_seconds: int = Field(
        default=60, ge=10, le=3600,
        description="The recovery point objective of WAL archiving: PostgreSQL's "
        "archive_timeout, the longest a written WAL segment waits before it is archived, so "
        "a restore to the latest point reaches every write older than this (10 to 3600; "
        "CloudNativePG's default would be 300). Each forced segment is compressed (gzip), "
        "so an idle minute costs kilobytes in the bucket.",
    )
    immediate: bool = Field(
        default=True,
        description="Also take a base backup as soon as the schedule is created, so the "
        "cortex is recoverable before the first scheduled time.",
    )


class RecoverySpec(CrdModel):
    """The backup a new cortex is made from; the source and its bucket are only read."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.objectStore) != has(self.backupName)",
        "message": "set exactly one of recovery.objectStore (with sourceCortex) or "
                   "recovery.backupName",
    }, {
        "rule": "!has(self.objectStore) || has(self.sourceCortex)",
        "message": "recovery.objectStore needs sourceCortex: the cortex whose backups are "
                   "under that path",
    }]})

    object_store: ObjectStore | None = Field(
        default=None,
        description="The bucket and path the source cortex backs up to (its spec.database."
        "cloudNativePG.backup.objectStore).",
    )
    source_cortex: str | None = Field(
        default=None,
        description="The MemoryCortex whose backups these are (it may be gone): its "
        "Cluster's name is the folder under the path.",
        min_length=1, max_length=50, pattern=DNS_LABEL_PATTERN,
    )
    backup_name: str | None = Field(
        default=None,
        description="A CloudNativePG Backup in this namespace to restore from instead "
        "(kubectl get backups.postgresql.cnpg.io).",
        min_length=1, max_length=253,
    )
    target_time: str | None = Field(
        default=None,
        description="Point-in-time recovery: replay the archived WAL up to this instant "
        "(RFC 3339 with a zone, e.g. 2026-12-02T12:00:00Z) and stop; absent: to the end "
        "of the archive.",
        max_length=40, pattern=TIME_PATTERN,
    )


class BootstrapSpec(CrdModel):
    """How a new Cluster starts: empty (the default) or from a backup."""

    recovery: RecoverySpec | None = Field(
        default=None,
        description="Make the database from a backup of another cortex. The cortex serves "
        "only after its verification Job proved the restored chain and rows (DataVerified).",
    )


class CloudNativePGDatabase(CrdModel):
    """A PostgreSQL cluster run by CloudNativePG (installed separately), owned by the cortex."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.synchronous) || self.synchronous.number < self.instances",
        "message": "synchronous.number must be less than instances: every synchronous "
                   "replica is one of the instances besides the primary",
    }]})

    instances: int = Field(
        default=3, ge=1, le=10,
        description="PostgreSQL instances: one primary and instances-1 streaming replicas "
        "that can take over when the primary fails.",
    )
    storage: StorageSpec = section(StorageSpec, "The data volume of each instance.")
    synchronous: SynchronousSpec | None = Field(
        default=None,
        description="Synchronous replication; absent: replicas follow asynchronously and a "
        "failover may lose the last acknowledged commits.",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of each PostgreSQL instance."
    )
    parameters: dict[str, str] | None = Field(
        default=None,
        description="PostgreSQL configuration parameters (postgresql.conf), passed to the "
        "Cluster as they are; CloudNativePG refuses the ones it manages. "
        "shared_preload_libraries and synchronous_standby_names are the operator's.",
        json_schema_extra={"maxProperties": MAX_PARAMETERS,
                           "additionalProperties": {"type": "string",
                                                    "maxLength": MAX_PARAMETER_VALUE},
                           "x-kubernetes-validations": [_owned_parameters_rule()]},
    )
    image_name: str | None = Field(
        default=None,
        description="PostgreSQL 17 + Apache AGE image of the instances (its tag must carry "
        "the major version, e.g. :17); the operator's postgres-age image when absent.",
        max_length=512,
    )
    pod_monitor: bool = Field(
        default=False,
        description="Ask CloudNativePG for a PodMonitor (needs the Prometheus operator's "
        "CRDs); off by default.",
    )
    backup: BackupSpec | None = Field(
        default=None,
        description="Continuous backups to an S3-compatible object store (WAL archiving "
        "and scheduled base backups); absent: none.",
    )
    bootstrap: BootstrapSpec | None = Field(
        default=None,
        description="Start from a backup instead of an empty database (restore, point-in-"
        "time recovery). Read when the Cluster is created; changing it later changes "
        "nothing.",
    )
