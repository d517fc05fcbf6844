"""BackedUp: the logical backup CronJob of ``spec.backup.logical`` and what its runs did.

Applies the CronJob (or removes it when the section goes), reads its Jobs (watched as every
child is, so a run that ends brings a pass) into ``status.backup``, and reports the newest
run as the ``BackedUp`` condition: True after a success, False with the export's own last
words after a failure (the object store unreachable, a refused credential). Not part of
``Ready``: a cortex whose backups fail keeps serving. Every new failure is a Warning event,
also when the condition was already False (the condition's transition posts the first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attested_cortex.builders import backups, schedules
from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.memorycortex.schema import last_words
from attested_cortex.controller.runtime import Runtime

KIND = "MemoryCortex"
CONDITION = "BackedUp"
Object = dict[str, Any]


@dataclass(frozen=True)
class BackupOutcome:
    """The BackedUp condition (None: no logical backup) and ``status.backup``."""

    condition: Observation | None
    status: Object | None


def _selector(cortex: Cortex) -> str:
    labels = n.selector(cortex.meta.name, "backup")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any]) -> BackupOutcome:
    """Apply or remove the CronJob; read its runs."""
    name, namespace = n.backup_cronjob_name(cortex.meta.name), cortex.meta.namespace
    spec, current = cortex.spec.backup.logical, status.get("backup")
    if spec is None:
        await rt.writer.remove("batch/v1", "CronJob", namespace, name)
        return BackupOutcome(None, current)
    try:
        schedules.parse_schedule(spec.schedule)
    except schedules.ScheduleError as exc:
        return BackupOutcome(Observation.of(
            CONDITION, False, "InvalidSchedule",
            f"spec.backup.logical.schedule {spec.schedule!r}: {exc}"), current)
    await rt.writer.apply(backups.build_logical_backup_cronjob(cortex, rt.defaults))
    runs = backups.last_runs(
        await rt.writer.list("batch/v1", "Job", namespace, _selector(cortex)), current)
    if runs.newest is None:
        return BackupOutcome(Observation(CONDITION, "Unknown", "BackupScheduled",
                                         f"CronJob {name} ({spec.schedule} UTC) has not "
                                         "finished a run yet"), runs.status or None)
    job, ok, reason, message = runs.newest
    if ok:
        return BackupOutcome(Observation.of(
            CONDITION, True, "BackupSucceeded", f"Job {job} exported the cortex to "
            f"{backups.location(cortex, spec)}"), runs.status)
    words = await last_words(rt, cortex, job)  # the pod's termination message
    failed = Observation.of(CONDITION, False, "BackupFailed",
                            f"Job {job} failed ({reason}: {message})"
                            + (f"; export said: {words}" if words else ""))
    runs.status["lastFailure"]["message"] = failed.message[:4096]  # the newest run's
    await _announce(rt, cortex, status, runs.status, failed)
    return BackupOutcome(failed, runs.status)


async def _announce(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], new: Object,
                    failed: Observation) -> None:
    """A Warning for a failure the status did not hold yet, when the condition stays False
    (a transition to False posts its own event with the status write)."""
    before = (status.get("backup") or {}).get("lastFailure")
    was_false = any(c.get("type") == CONDITION and c.get("status") == "False"
                    for c in status.get("conditions") or [])
    if was_false and new.get("lastFailure") != before:
        await post_event(rt.writer, kind=KIND, meta=cortex.meta, type_="Warning",
                         reason="BackupFailed", message=failed.message)
