"""The CloudNativePG ``postgresql.cnpg.io/v1`` Cluster of a ``cloudNativePG`` cortex. Pure.

Built from ``spec.database.cloudNativePG`` like the managed StatefulSet is from ``managed``
(CloudNativePG's own ``pkg/specs`` style: a spec literal in, an object out). Decided here
rather than by the user:

- the image: ours (``images/postgres-age``), PostgreSQL 17 + Apache AGE + pgvector, whose
  ``postgres`` user is uid/gid 999 (``postgresUID``/``postgresGID``, CloudNativePG's
  default being 26);
- Apache AGE preloaded through ``postgresql.shared_preload_libraries`` (CloudNativePG owns
  that parameter and refuses it in ``parameters``): the server's sessions then need no
  ``LOAD 'age'``, which only a superuser may run;
- ``bootstrap.initdb``: the database and its owner, the application user of the
  ``<cluster>-app`` Secret, and, as the superuser at bootstrap, the two extensions the
  application user may not create itself (``age`` and ``vector`` are untrusted) and the
  owner's read access to AGE's catalog, so the same ``cortexctl migrate`` serves all three
  modes (its ``CREATE EXTENSION IF NOT EXISTS`` finds them, the owner creates the graph);
  the superuser is not reachable from outside (``enableSuperuserAccess: false``);
- the recommended labels on the Cluster and, through ``inheritedMetadata``, on what
  CloudNativePG creates for it (``managed-by`` stays on the Cluster only: its pods and
  Secrets are CloudNativePG's);
- with replicas, ``wal_retrieve_retry_interval`` 200 ms (:data:`REPLICA_PARAMETERS`; a user's
  ``parameters`` win);
- monitoring off unless ``podMonitor`` asks;
- with ``backup``, WAL archiving and base backups to the object store, and with
  ``bootstrap.recovery`` the database restored from a backup instead of initdb
  (``builders/backups.py``, ADR 0038).

CloudNativePG's pods already meet the "restricted" Pod Security Standard (non-root,
RuntimeDefault seccomp, no privilege escalation, all capabilities dropped, read-only root).
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders import backups, names
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.builders.secrets import DB_NAME, DB_USER
from attested_cortex.crd.cloudnativepg import CloudNativePGDatabase, RecoverySpec

Object = dict[str, Any]

API_VERSION: Final = "postgresql.cnpg.io/v1"
KIND: Final = "Cluster"
#: The ``postgres`` user of images/postgres-age (Debian's).
POSTGRES_UID: Final = 999
#: The application Secret CloudNativePG writes: username, password, host, port, dbname, uri.
APP_SECRET_SUFFIX: Final = "-app"
#: Its key holding ``postgresql://user:password@<cluster>-rw.<namespace>:5432/<db>``.
APP_URI_KEY: Final = "uri"
PRELOADED: Final = ("age",)
#: Seconds of PostgreSQL's smart shutdown when an instance stops (CloudNativePG's default 180,
#: then fast). Smart shutdown waits for clients to disconnect, and the cortex's pool never
#: does: a deleted primary kept serving its pooled sessions, its replicas kept receiving WAL
#: and CloudNativePG, which elects a new primary only once every WAL receiver is down, waited
#: the whole 180 s (measured on the real node, e2e/test_ha.py). Fast at once instead: open
#: transactions are rolled back (the server answers 503 and the client retries with its
#: Idempotency-Key), acknowledged commits are on the synchronous replica already (ADR 0032).
SMART_SHUTDOWN_S: Final = 0
#: PostgreSQL parameters of a Cluster with replicas unless ``parameters`` sets them. A replica
#: whose primary went away tries streaming again only every ``wal_retrieve_retry_interval``
#: (5 s by default), so after a promotion the replica left followed the new primary up to
#: 5 s late (plus its restore_command's attempts), and with ``dataDurability: required``
#: every commit waited for it: the 7-9 s first write after a promotion of issue 38.
#: CloudNativePG's own fast-failover test sets it to 2 s. 200 ms (ADR 0111): once the
#: replica's reconnect is bounded (CloudNativePG's STANDBY_TCP_USER_TIMEOUT), its retries are
#: what is left, and a retry costs a refused connect and one restore_command run; measured
#: 1.6-2.3 s past the promotion against 2.8-4.7 s at 1 s.
REPLICA_PARAMETERS: Final = {"wal_retrieve_retry_interval": "200ms"}
#: Run once by CloudNativePG as the superuser in the new application database: the two
#: untrusted extensions, and what the owner needs of AGE's catalog to create and use its
#: graph (found with cortexctl migrate and serve as a non-superuser owner: without USAGE
#: "permission denied for schema ag_catalog", without SELECT "... for table ag_graph").
BOOTSTRAP_SQL: Final = ("CREATE EXTENSION IF NOT EXISTS age",
                        "CREATE EXTENSION IF NOT EXISTS vector",
                        f"GRANT USAGE ON SCHEMA ag_catalog TO {DB_USER}",
                        f"GRANT SELECT ON ALL TABLES IN SCHEMA ag_catalog TO {DB_USER}")


def cluster_name(cortex: str) -> str:
    """The Cluster (and the prefix of its pods, Services and Secrets)."""
    return names.db_name(cortex)


def app_secret_name(cortex: str) -> str:
    """CloudNativePG's application Secret of the cortex's Cluster."""
    return cluster_name(cortex) + APP_SECRET_SUFFIX


def rw_service_name(cortex: str) -> str:
    """The read-write Service: always the current primary."""
    return cluster_name(cortex) + "-rw"


def spec_of(cortex: Cortex) -> CloudNativePGDatabase:
    """``spec.database.cloudNativePG``; a ValueError for a cortex of another mode."""
    wanted = cortex.spec.database.cloud_native_pg
    if wanted is None:
        raise ValueError("a Cluster is built only for spec.database.cloudNativePG")
    return wanted


def restored_from(wanted: CloudNativePGDatabase) -> RecoverySpec | None:
    """The backup the Cluster starts from, or None for a new, empty database."""
    return wanted.bootstrap.recovery if wanted.bootstrap is not None else None


def _bootstrap(wanted: CloudNativePGDatabase) -> Object:
    recovery = restored_from(wanted)
    if recovery is not None:
        return backups.recovery_bootstrap(recovery)[0]
    return {"initdb": {"database": DB_NAME, "owner": DB_USER,
                       "postInitApplicationSQL": list(BOOTSTRAP_SQL)}}


def _postgresql(wanted: CloudNativePGDatabase) -> Object:
    defaults = dict(REPLICA_PARAMETERS) if wanted.instances > 1 else {}
    if wanted.backup is not None:  # the archive's recovery point objective (backups.py)
        defaults.update(backups.archive_parameters(wanted.backup))
    parameters = {**defaults, **(wanted.parameters or {})}
    out: Object = {"shared_preload_libraries": list(PRELOADED),
                   "parameters": dict(sorted(parameters.items()))}
    if wanted.synchronous is not None:
        out["synchronous"] = {"method": wanted.synchronous.method,
                              "number": wanted.synchronous.number,
                              "dataDurability": wanted.synchronous.data_durability}
    return out


def _storage(wanted: CloudNativePGDatabase) -> Object:
    out: Object = {"size": wanted.storage.size}
    if wanted.storage.storage_class_name:
        out["storageClass"] = wanted.storage.storage_class_name
    return out


def _inherited_labels(cortex: str) -> dict[str, str]:
    labels = names.labels(cortex, "database")
    del labels[names.MANAGED_BY_LABEL]
    return labels


def _metadata(cortex: Cortex, namespace_uid: str) -> Object:
    """Controlled by the cortex, and owned by its Namespace too: when the cortex is deleted
    the garbage collector only drops the cortex's reference (another owner remains), so the
    Cluster, its volumes and its credentials outlive the cortex as the managed database's
    claim does, and a cortex made again under the same name adopts it (ADR 0028)."""
    meta = names.metadata(cluster_name(cortex.meta.name), cortex.meta, component="database")
    meta["ownerReferences"].append(names.namespace_owner(cortex.meta.namespace, namespace_uid))
    return meta


def build_cluster(cortex: Cortex, defaults: Defaults, *, namespace_uid: str) -> Object:
    """The Cluster of the cortex (ADR 0028); ``namespace_uid``: its Namespace's uid."""
    wanted = spec_of(cortex)
    name = cortex.meta.name
    spec: Object = {
        "instances": wanted.instances,
        "imageName": wanted.image_name or defaults.postgres_image,
        "imagePullPolicy": defaults.image_pull_policy,
        "postgresUID": POSTGRES_UID, "postgresGID": POSTGRES_UID,
        "enableSuperuserAccess": False,
        "smartShutdownTimeout": SMART_SHUTDOWN_S,
        "inheritedMetadata": {"labels": _inherited_labels(name)},
        "bootstrap": _bootstrap(wanted),
        "postgresql": _postgresql(wanted),
        "storage": _storage(wanted),
        "monitoring": {"enablePodMonitor": wanted.pod_monitor},
    }
    if wanted.resources is not None:
        spec["resources"] = wanted.resources.model_dump(exclude_none=True)
    if wanted.backup is not None:
        spec["backup"] = backups.cluster_backup(wanted.backup)
    recovery = restored_from(wanted)
    if recovery is not None and (origin := backups.recovery_bootstrap(recovery)[1]):
        spec["externalClusters"] = origin
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": _metadata(cortex, namespace_uid), "spec": spec}
