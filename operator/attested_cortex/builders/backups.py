"""Backups and restores of a ``cloudNativePG`` cortex: the Cluster's pieces and the
``ScheduledBackup``. Pure.

CloudNativePG's in-tree Barman object store (ADR 0038): ``spec.backup.barmanObjectStore``
turns on WAL archiving from every primary and is where base backups go, with the
``retentionPolicy`` beside it; a ``ScheduledBackup`` (owned by the cortex, applied by the
operator) takes base backups on the schedule. A restore is the Cluster's
``bootstrap.recovery`` from an ``externalClusters`` entry that points at the source's
bucket and folder (or from a ``Backup`` by name), optionally to a ``targetTime``. The
object store's credentials are a Secret the instances read by reference; the operator never
reads them.

Called by ``builders/clusters.py`` (the Cluster's fields) and the backup step of the
controller (the ScheduledBackup).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.secrets import DB_NAME, DB_USER
from attested_cortex.crd.cloudnativepg import (
    ACCESS_KEY_ID,
    ACCESS_SECRET_KEY,
    BackupSpec,
    ObjectStore,
    RecoverySpec,
)

Object = dict[str, Any]

API_VERSION: Final = "postgresql.cnpg.io/v1"
SCHEDULED_KIND: Final = "ScheduledBackup"
BACKUP_KIND: Final = "Backup"
METHOD: Final = "barmanObjectStore"
#: The externalClusters entry a restore reads from.
ORIGIN: Final = "origin"
#: Compression of base backups and WAL segments (barman-cloud's; gzip is in every Python).
COMPRESSION: Final = "gzip"
#: The label CloudNativePG puts on every Backup of a Cluster.
CLUSTER_LABEL: Final = "cnpg.io/cluster"


def destination(store: ObjectStore) -> str:
    """``s3://<bucket>/<path>``: barman's destinationPath (the Cluster's folder goes below).

    No slash after the path: barman-cloud keeps it in its prefix, and its retention run
    (``barman-cloud-backup-delete``, after every backup) lists the keep annotations under
    ``<prefix>/<server>/base/``, so ``path/`` became ``path//<server>/base/``, which MinIO
    refuses (XMinioInvalidObjectName): CloudNativePG's ``RetentionPolicyFailed`` event after
    every backup (issue 38 item 9). WAL and base backups land on the same keys either way
    (barman joins those with ``os.path.join``)."""
    return f"s3://{store.bucket}/{store.path.strip('/')}" if store.path else \
        f"s3://{store.bucket}/"


def _credentials(store: ObjectStore) -> Object:
    secret = store.credentials_secret_ref.name
    return {"accessKeyId": {"name": secret, "key": ACCESS_KEY_ID},
            "secretAccessKey": {"name": secret, "key": ACCESS_SECRET_KEY}}


def object_store(store: ObjectStore) -> Object:
    """The ``barmanObjectStore`` section for ``store`` (backup and recovery alike)."""
    return {"destinationPath": destination(store), "endpointURL": store.endpoint,
            "s3Credentials": _credentials(store),
            "wal": {"compression": COMPRESSION}, "data": {"compression": COMPRESSION}}


def cluster_backup(wanted: BackupSpec) -> Object:
    """The Cluster's ``spec.backup``: WAL archiving and the base backups' store.

    A base backup starts with an immediate checkpoint: PostgreSQL's default spreads the
    backup's checkpoint over ``checkpoint_completion_target`` x ``checkpoint_timeout``
    (0.9 x 5 min), and measured on the real node that wait, 269 s, was most of a backup's
    time at any size (docs/PERFORMANCE.md); the price is one burst of writes at its start.
    """
    store = object_store(wanted.object_store)
    store["data"] = {**store["data"], "immediateCheckpoint": True}
    return {"barmanObjectStore": store, "retentionPolicy": wanted.retention}


def archive_parameters(wanted: BackupSpec) -> dict[str, str]:
    """PostgreSQL parameters of a Cluster that archives: ``archive_timeout`` from
    ``archiveTimeoutSeconds`` (issue 38: at CloudNativePG's 5 min, a restore taken 2 min after
    the last write held 412 of 573 memories)."""
    return {"archive_timeout": f"{wanted.archive_timeout_seconds}s"}


def _origin(recovery: RecoverySpec) -> list[Object]:
    if recovery.object_store is None or recovery.source_cortex is None:
        return []
    section = object_store(recovery.object_store)
    # Barman's folder of the source: its Cluster's name (builders/clusters.cluster_name).
    section["serverName"] = names.db_name(recovery.source_cortex)
    return [{"name": ORIGIN, "barmanObjectStore": section}]


def postgres_time(instant: str) -> str:
    """``targetTime`` as PostgreSQL's recovery_target_time takes it: UTC with a numeric
    offset. CloudNativePG rewrites an RFC 3339 time in UTC to ``... 13:56:36.000000Z``, and
    PostgreSQL refuses a zone abbreviation there ("invalid value for parameter
    recovery_target_time", found on the real node); this form it passes through as it is."""
    moment = datetime.fromisoformat(instant.replace(" ", "T")).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f+00")


def recovery_bootstrap(recovery: RecoverySpec) -> tuple[Object, list[Object]]:
    """The Cluster's ``bootstrap`` and ``externalClusters`` for a restore."""
    out: Object = {"database": DB_NAME, "owner": DB_USER}
    if recovery.backup_name is not None:
        out["backup"] = {"name": recovery.backup_name}
    else:
        out["source"] = ORIGIN
    if recovery.target_time is not None:
        out["recoveryTarget"] = {"targetTime": postgres_time(recovery.target_time)}
    return {"recovery": out}, _origin(recovery)


def scheduled_backup_name(cortex: str) -> str:
    """The ScheduledBackup: the Cluster's name (one schedule per Cluster)."""
    return names.db_name(cortex)


def build_scheduled_backup(cortex: Cortex, wanted: BackupSpec) -> Object:
    """The ScheduledBackup of the cortex's Cluster, controlled by the cortex. Its Backups
    are owned by the Cluster (``backupOwnerReference: cluster``), which outlives the cortex
    (ADR 0028): a restore by Backup name still works after the source cortex is gone."""
    name = cortex.meta.name
    return {"apiVersion": API_VERSION, "kind": SCHEDULED_KIND,
            "metadata": names.metadata(scheduled_backup_name(name), cortex.meta,
                                       component="database"),
            "spec": {"schedule": wanted.schedule, "immediate": wanted.immediate,
                     "cluster": {"name": names.db_name(name)}, "method": METHOD,
                     "backupOwnerReference": "cluster"}}
