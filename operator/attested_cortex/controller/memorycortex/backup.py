"""BackupHealthy and ``status.backup`` of a ``cloudNativePG`` cortex with ``backup``.

Called by :mod:`.reconciling` after the database step. WAL archiving itself is the
Cluster's ``spec.backup`` (applied with the Cluster, ``builders/clusters.py``); this step
applies the cortex's ``ScheduledBackup`` (server-side apply, controlled by the cortex) once
the database is ready, lists the Cluster's ``Backup`` objects (CloudNativePG labels them
``cnpg.io/cluster``) and reads the Cluster's status (``builders/backupstates.py``). A
Backup that failed since the last pass posts a Warning event naming it and barman-cloud's
reason (the condition's own transition posts one too, so only a failure that finds the
condition already False posts here). With ``backup`` removed from the spec the
ScheduledBackup goes (and readiness drops BackupHealthy and ``status.backup``); the Backups
and the bucket's content stay.

Not part of ``Ready``: an unreachable object store is a condition and an event, and the
cortex keeps serving. While the database is not ready (a failover moving the primary) the
backups that exist still exist: BackupHealthy keeps what it said (issue 38: it turned
``BackupPending`` at every failover); a retrying archiver is judged after its grace
(``builders/backupstates.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from attested_cortex.builders import archivereach, backups, backupstates, clusters
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.memorycortex.database import DatabaseOutcome
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiError, ApiNotFoundError

KIND: Final = "MemoryCortex"
#: While a backup runs or archiving fails, look again this often (reads only): Backups are
#: not watched, and a failing archive changes nothing on the Cluster between its retries.
UNSETTLED_POLL_S: Final = 30.0
#: CloudNativePG's instance manager: its status endpoint (``/pg/status``, 1.27).
STATUS_PORT: Final = 8000
STATUS_PATH: Final = "/pg/status"
#: The instance manager serves its status over TLS when started with this flag.
STATUS_TLS_FLAG: Final = "--status-port-tls"


@dataclass(frozen=True)
class BackupOutcome:
    """BackupHealthy (None: no backups configured) and ``status.backup``."""

    condition: Observation | None = None
    fields: dict[str, Any] | None = None
    retry_in: float | None = None


def _was_false(status: Mapping[str, Any]) -> bool:
    return any(c.get("type") == backupstates.TYPE and c.get("status") == "False"
               for c in status.get("conditions") or [])


def _kept(status: Mapping[str, Any]) -> Observation | None:
    """BackupHealthy as the status shows it, when a backup has completed (else None)."""
    if not (status.get("backup") or {}).get("lastSuccessfulBackup"):
        return None
    shown = next((c for c in status.get("conditions") or []
                  if c.get("type") == backupstates.TYPE), None)
    if shown is None:
        return None
    return Observation.of(backupstates.TYPE, shown.get("status") == "True",
                          str(shown.get("reason")), str(shown.get("message") or ""))


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any],
                 db: DatabaseOutcome) -> BackupOutcome:
    """Apply the ScheduledBackup and read where the backups stand."""
    cnpg = cortex.spec.database.cloud_native_pg
    wanted = cnpg.backup if cnpg is not None else None
    ns, name = cortex.meta.namespace, cortex.meta.name
    if wanted is None:
        if cnpg is not None and (status.get("backup") is not None or any(
                c.get("type") == backupstates.TYPE for c in status.get("conditions") or [])):
            await rt.writer.remove(backups.API_VERSION, backups.SCHEDULED_KIND, ns,
                                   backups.scheduled_backup_name(name))
        return BackupOutcome()
    if db.condition.status != "True" or db.cluster is None:
        if (kept := _kept(status)) is not None:  # a primary moving: the backups stay
            return BackupOutcome(kept, status.get("backup"), UNSETTLED_POLL_S)
        return BackupOutcome(Observation.of(
            backupstates.TYPE, False, backupstates.PENDING,
            "backups start once the database is ready"), status.get("backup"))
    try:
        await rt.writer.apply(backups.build_scheduled_backup(cortex, wanted))
        listed = await rt.writer.list(backups.API_VERSION, backups.BACKUP_KIND, ns,
                                      f"{backups.CLUSTER_LABEL}={clusters.cluster_name(name)}")
    except ApiNotFoundError:  # CloudNativePG went away between two steps: DatabaseReady says
        return BackupOutcome()
    reach = await archive_reach(rt, ns, db.cluster)
    state = backupstates.observe(db.cluster, listed,
                                 destination=backups.destination(wanted.object_store),
                                 before=status.get("backup"), now=datetime.now(UTC),
                                 archive_timeout_s=wanted.archive_timeout_seconds,
                                 reach=reach)
    if state.new_failure is not None and _was_false(status):
        failure = state.new_failure
        await post_event(rt.writer, kind=KIND, meta=cortex.meta, type_="Warning",
                         reason=backupstates.FAILED,
                         message=f"Backup {failure['backup']} failed: {failure['reason']}")
    unsettled = state.condition.status != "True"
    retry = UNSETTLED_POLL_S if unsettled else None
    if reach:  # the archive's end moves with the writes: look again (a read; the status
        # is written only when it changed, so an idle cortex costs no write)
        retry = min(retry or UNSETTLED_POLL_S, float(wanted.archive_timeout_seconds or
                                                     UNSETTLED_POLL_S))
    if state.recheck_in is not None:  # judge the retrying archiver when its grace ends
        retry = min(retry or UNSETTLED_POLL_S, state.recheck_in + 1)
    return BackupOutcome(state.condition, state.fields, retry)


def _status_scheme(pod: Mapping[str, Any] | None) -> str:
    """https when the instance manager serves its status over TLS (CloudNativePG decides
    it per pod the same way: the flag in the ``postgres`` container's command)."""
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        if container.get("name") == "postgres":
            return "https" if STATUS_TLS_FLAG in (container.get("command") or []) else "http"
    return "https"


async def archive_reach(rt: Runtime, namespace: str,
                        cluster: Mapping[str, Any]) -> dict[str, Any] | None:
    """How far the archive reaches, from the primary's instance manager (ADR 0110); None
    when it cannot be read now (the primary moving, no proxy permission): the fields are
    then left out, never guessed."""
    primary = str((cluster.get("status") or {}).get("currentPrimary") or "")
    if not primary:
        return None
    try:
        pod = await rt.writer.get("v1", "Pod", namespace, primary)
        text = await rt.writer.proxy_get(namespace, primary, _status_scheme(pod),
                                         STATUS_PORT, STATUS_PATH)
        answer = json.loads(text)
    except (ApiError, ValueError):
        return None
    if not isinstance(answer, dict):
        return None
    return archivereach.reach(answer, archivereach.segment_mb(cluster)) or None
