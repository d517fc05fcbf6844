"""``status.backup`` and the ``BackupHealthy`` condition of a ``cloudNativePG`` cortex,
read from its Cluster's status and its ``Backup`` objects. Pure.

CloudNativePG reports WAL archiving in the Cluster's ``ContinuousArchiving`` condition
(False with barman-cloud's words when the object store refuses or cannot be reached), the
last backup in ``LastBackupSucceeded``, and ``firstRecoverabilityPoint`` /
``lastSuccessfulBackup`` (in-tree Barman object store; ADR 0038); each base backup is a
``Backup`` (``status.phase`` pending/running/completed/failed, ``stoppedAt``, ``error``).
:func:`observe` sums these up, first match wins: archiving failing; the newest Backup
failed; no backup completed yet; healthy. ``BackupHealthy`` is not part of ``Ready``: a
cortex whose object store is down keeps serving, and says so.

Archiving is judged by the archiver's own state, debounced (issue 38: every failover turned
BackupHealthy False and fired the backup alert). CloudNativePG's archive command refuses
while the pod is not the Cluster's current primary ("switchover in progress, refusing
archiving"): that is the old primary during a failover or a switchover, never the
archiver's failure, so it never counts. Any other refusal counts once the condition has
stayed False for :data:`ARCHIVE_GRACE_S` (its own ``lastTransitionTime``): PostgreSQL keeps
the WAL and retries, and a retry that succeeds within the grace was no outage. Meanwhile
the verdict is what the Backups say, and the message names the retrying archiver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from attested_cortex.builders.conditions import Observation

Object = Mapping[str, Any]
TYPE: Final = "BackupHealthy"
ARCHIVING: Final = "ContinuousArchiving"
#: Reasons of BackupHealthy; BackupPending is progress, not a fault (builders/reasons.py).
FAILING: Final = "ArchivingFailing"
FAILED: Final = "BackupFailed"
PENDING: Final = "BackupPending"
HEALTHY: Final = "BackupsSucceeding"
#: How long a refusing archiver may retry before BackupHealthy says archiving fails: a
#: failover's retries end within seconds; an object store that is down stays down.
ARCHIVE_GRACE_S: Final = 120.0
#: CloudNativePG's archive command on a pod that is not the current primary (1.27:
#: pkg/management/postgres/archiver): the old primary of a failover or switchover.
NOT_THE_PRIMARY: Final = "switchover in progress"


@dataclass(frozen=True)
class BackupState:
    """The condition, ``status.backup``, and the failed Backup that is new since ``before``."""

    condition: Observation
    fields: dict[str, Any]
    new_failure: dict[str, Any] | None
    #: Seconds until a retrying archiver's grace ends (look again then), else None.
    recheck_in: float | None = None


def _condition(cluster_status: Object, type_: str) -> Object:
    return next((c for c in cluster_status.get("conditions") or [] if c.get("type") == type_),
                {})


def _created(backup: Object) -> str:
    return str((backup.get("metadata") or {}).get("creationTimestamp") or "")


def _phase(backup: Object) -> str:
    return str((backup.get("status") or {}).get("phase") or "pending")


def _failure(backup: Object) -> dict[str, Any]:
    status = backup.get("status") or {}
    reason = status.get("error") or status.get("commandError") or "failed"
    when = status.get("stoppedAt") or _created(backup) or None
    return {"backup": backup["metadata"]["name"], "time": when, "reason": str(reason)[:1024]}


def _fields(cluster_status: Object, backups: Sequence[Object],
            archive_timeout_s: int | None = None,
            reach: Mapping[str, Any] | None = None) -> dict[str, Any]:
    completed = [b for b in backups if _phase(b) == "completed"]
    failed = [b for b in backups if _phase(b) == "failed"]
    last = max(completed, key=lambda b: str((b.get("status") or {}).get("stoppedAt") or ""),
               default=None)
    out: dict[str, Any] = {
        "lastSuccessfulBackup": ((last or {}).get("status") or {}).get("stoppedAt")
        or cluster_status.get("lastSuccessfulBackup"),
        "lastBackupName": last["metadata"]["name"] if last else None,
        # CloudNativePG's own figure, or (before it has written one) the end of the oldest
        # completed base backup: the earliest instant a restore can reach.
        "firstRecoverabilityPoint": cluster_status.get("firstRecoverabilityPoint") or min(
            (str(b["status"]["stoppedAt"]) for b in completed
             if (b.get("status") or {}).get("stoppedAt")), default=None),
        "completed": len(completed),
        "lastFailure": _failure(max(failed, key=_created)) if failed else None,
        "archiveTimeoutSeconds": archive_timeout_s,
        "walArchivingSince": _archiving_since(cluster_status),
        **(reach or {})}
    return {k: v for k, v in out.items() if v is not None}


def _false_for(archiving: Object, now: datetime) -> float:
    """Seconds the archiving condition has been False (a stamp it lacks: as long as any)."""
    try:
        since = datetime.fromisoformat(str(archiving["lastTransitionTime"]))
    except (KeyError, ValueError):
        return float("inf")
    return (now - since).total_seconds()


def archiving_grace(cluster_status: Object, now: datetime) -> float | None:
    """None when WAL archiving counts as failing now (or works); else the seconds of grace
    left to a refusing archiver (0.0 and up; inf: the old primary's refusal)."""
    archiving = _condition(cluster_status, ARCHIVING)
    if archiving.get("status") != "False":
        return None
    if NOT_THE_PRIMARY in str(archiving.get("message") or ""):
        return float("inf")
    left = ARCHIVE_GRACE_S - _false_for(archiving, now)
    return left if left > 0 else None


def _archiving_since(cluster_status: Object) -> str | None:
    """When archiving last started to work (None while it is refused or never reported)."""
    archiving = _condition(cluster_status, ARCHIVING)
    if archiving.get("status") != "True":
        return None
    return str(archiving.get("lastTransitionTime") or "") or None


def _verdict(cluster_status: Object, backups: Sequence[Object], fields: Mapping[str, Any],
             destination: str, now: datetime) -> Observation:
    archiving = _condition(cluster_status, ARCHIVING)
    if archiving.get("status") == "False" and archiving_grace(cluster_status, now) is None:
        return Observation.of(TYPE, False, FAILING,
                              f"WAL archiving to {destination} fails: "
                              f"{archiving.get('message') or archiving.get('reason')}")
    newest = max(backups, key=_created, default=None)
    if newest is not None and _phase(newest) == "failed":
        failure = _failure(newest)
        return Observation.of(TYPE, False, FAILED,
                              f"Backup {failure['backup']} to {destination} failed: "
                              f"{failure['reason']}")
    if not fields.get("lastSuccessfulBackup"):
        running = f"Backup {newest['metadata']['name']} is {_phase(newest)}" if newest else \
            "no backup has started yet"
        return Observation.of(TYPE, False, PENDING,
                              f"no backup to {destination} has completed yet: {running}")
    reach = fields.get("archiveTimeoutSeconds")
    archiver = (("WAL archiving works" + (f": a restore to the latest point reaches every "
                                          f"write older than {reach} s" if reach else ""))
                if archiving.get("status") != "False" else
                f"the WAL archiver is retrying ({archiving.get('message') or 'refused'})")
    return Observation.of(TYPE, True, HEALTHY,
                          f"last backup {fields.get('lastBackupName') or ''} completed at "
                          f"{fields['lastSuccessfulBackup']} to {destination}; recoverable "
                          f"from {fields.get('firstRecoverabilityPoint') or 'its end'}; "
                          f"{archiver}"[:1024])


def observe(cluster: Object | None, backups: Sequence[Object], *, destination: str,
            before: Mapping[str, Any] | None, now: datetime,
            archive_timeout_s: int | None = None,
            reach: Mapping[str, Any] | None = None) -> BackupState:
    """What the Cluster and its Backups say; ``before``: the cortex's ``status.backup``;
    ``archive_timeout_s``: the spec's recovery point objective of the archive; ``reach``:
    how far the archive reaches now (``builders/archivereach.py``; None: unknown)."""
    cluster_status = (cluster or {}).get("status") or {}
    fields = _fields(cluster_status, backups, archive_timeout_s, reach)
    condition = _verdict(cluster_status, backups, fields, destination, now)
    failure = fields.get("lastFailure")
    known = ((before or {}).get("lastFailure") or {}).get("backup")
    new = failure if failure is not None and failure.get("backup") != known else None
    grace = archiving_grace(cluster_status, now)
    return BackupState(condition, fields, new,
                       grace if grace is not None and grace != float("inf") else None)
