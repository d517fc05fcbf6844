"""LogicalBackupHealthy: the CronJob of ``spec.backup.logical`` and what its runs did.

Applies the CronJob (or removes it when the section goes), reads its Jobs (watched as every
child is, so a run that ends brings a pass) into ``status.logicalBackup``, and reports the
newest run as the ``LogicalBackupHealthy`` condition (the physical path's is
``BackupHealthy``): True after a success, False with the export's own last words after a
failure (the object store unreachable, a refused credential). Not part of
``Ready``: a cortex whose backups fail keeps serving. Every new failure is a Warning event,
also when the condition was already False (the condition's transition posts the first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attested_cortex.builders import logicalbackups, schedules
from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.memorycortex.schema import last_words
from attested_cortex.controller.runtime import Runtime

KIND = "MemoryCortex"
CONDITION = "LogicalBackupHealthy"
Object = dict[str, Any]


@dataclass(frozen=True)
class LogicalBackupOutcome:
    """The condition (None: no logical backup) and ``status.logicalBackup``."""

    condition: Observation | None
    status: Object | None


def _selector(cortex: Cortex) -> str:
    labels = n.selector(cortex.meta.name, "backup")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


async def ensure(rt: Runtime, cortex: Cortex,
                 status: Mapping[str, Any]) -> LogicalBackupOutcome:
    """Apply or remove the CronJob; read its runs."""
    name, namespace = n.backup_cronjob_name(cortex.meta.name), cortex.meta.namespace
    spec, current = cortex.spec.backup.logical, status.get("logicalBackup")
    if spec is None:
        await rt.writer.remove("batch/v1", "CronJob", namespace, name)
        return LogicalBackupOutcome(None, current)
    try:
        schedules.parse_schedule(spec.schedule)
    except schedules.ScheduleError as exc:
        return LogicalBackupOutcome(Observation.of(
            CONDITION, False, "InvalidSchedule",
            f"spec.backup.logical.schedule {spec.schedule!r}: {exc}"), current)
    await rt.writer.apply(logicalbackups.build_logical_backup_cronjob(cortex, rt.defaults))
    runs = logicalbackups.last_runs(
        await rt.writer.list("batch/v1", "Job", namespace, _selector(cortex)), current)
    if runs.newest is None:
        waiting = Observation(CONDITION, "Unknown", "BackupScheduled",
                              f"CronJob {name} ({spec.schedule} UTC) has not finished a run "
                              "yet")
        return LogicalBackupOutcome(waiting, runs.status or None)
    job, ok, reason, message = runs.newest
    if ok:
        return LogicalBackupOutcome(Observation.of(
            CONDITION, True, "BackupSucceeded", f"Job {job} exported the cortex to "
            f"{logicalbackups.location(cortex, spec)}"), runs.status)
    words = await last_words(rt, cortex, job)  # the pod's termination message
    failed = Observation.of(CONDITION, False, "BackupFailed",
                            f"Job {job} failed ({reason}: {message})"
                            + (f"; export said: {words}" if words else ""))
    if words:  # the newest run's failure, in the export's own words
        runs.status["lastFailure"]["reason"] = words[-1024:]
    await _announce(rt, cortex, status, runs.status, failed)
    return LogicalBackupOutcome(failed, runs.status)


async def _announce(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], new: Object,
                    failed: Observation) -> None:
    """A Warning for a failure the status did not hold yet, when the condition stays False
    (a transition to False posts its own event with the status write)."""
    before = ((status.get("logicalBackup") or {}).get("lastFailure") or {}).get("backup")
    was_false = any(c.get("type") == CONDITION and c.get("status") == "False"
                    for c in status.get("conditions") or [])
    if was_false and (new.get("lastFailure") or {}).get("backup") != before:
        await post_event(rt.writer, kind=KIND, meta=cortex.meta, type_="Warning",
                         reason="BackupFailed", message=failed.message)
