"""SchemaReady: one migration Job per target schema version, and what became of it.

The order of checks is a chain of small policies, first match wins: a target this build
does not know; a database already at the target (status says so: no Job needed, even after
the finished Job's TTL removed it); a target below the database's version (never migrated
down); the database not ready yet; then the Job: absent (create it), failed (its reason and
the migrate command's last words), complete, or running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attested_cortex.builders import jobs
from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
NEWER_MARKER = "newer than this build"
LAST_WORDS_RETRY_S = 5.0
LAST_WORDS_WINDOW_S = 120.0


@dataclass(frozen=True)
class SchemaOutcome:
    """SchemaReady and the version the database is known to be at."""

    condition: Observation
    version: int | None
    #: Look again after this many seconds (a failed pod's last words may come later).
    retry_in: float | None = None


def _job_condition(job: Object, type_: str) -> Object | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


async def last_words(rt: Runtime, cortex: Cortex, job_name: str) -> str:
    """A failed Job's container termination message (its last log lines): the migrate
    command's, or a logical backup's export (``backup.py``)."""
    pods = await rt.writer.list("v1", "Pod", cortex.meta.namespace, f"job-name={job_name}")
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""),
                      reverse=True):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            message = ((status.get("state") or {}).get("terminated") or {}).get("message")
            if message:
                return str(message).strip()[-1000:]
    return ""


async def _failed(rt: Runtime, cortex: Cortex, job: Object, failed: Object,
                  known: int | None) -> SchemaOutcome:
    name = job["metadata"]["name"]
    words = await last_words(rt, cortex, name)
    reason = "DatabaseNewerThanBuild" if NEWER_MARKER in words else "MigrationFailed"
    message = (f"Job {name} failed ({failed.get('reason', 'Failed')}: "
               f"{failed.get('message', '')})" + (f"; migrate said: {words}" if words else ""))
    # Pods are not watched: if the termination message is not there yet, read again soon
    # (for two minutes after the failure; reads only).
    return SchemaOutcome(Observation.of("SchemaReady", False, reason, message), known,
                         retry_in=None if words or not _recent(failed) else LAST_WORDS_RETRY_S)


def _recent(condition: Object) -> bool:
    stamp = str(condition.get("lastTransitionTime") or "")
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (datetime.now(UTC) - when).total_seconds() < LAST_WORDS_WINDOW_S


def _policy(cortex: Cortex, target: int, newest: int, known: int | None,
            database_ready: bool) -> SchemaOutcome | None:
    if target > newest:
        return SchemaOutcome(Observation.of(
            "SchemaReady", False, "TargetVersionUnsupported",
            f"spec.schema.targetVersion {target} is newer than this operator knows "
            f"({newest})"), known)
    if known is not None and known == target:
        return SchemaOutcome(Observation.of("SchemaReady", True, "Migrated",
                                            f"the database is at schema version {target}"),
                             known)
    if known is not None and known > target:
        return SchemaOutcome(Observation.of(
            "SchemaReady", False, "DowngradeRefused",
            f"the database is at schema version {known}; target {target} is older and "
            "the operator never migrates down"), known)
    if not database_ready:
        return SchemaOutcome(Observation.of("SchemaReady", False, "WaitingForDatabase",
                                            "the migration starts once the database is "
                                            "ready"), known)
    return None


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], *,
                 database_ready: bool) -> SchemaOutcome:
    """Create or follow the migration Job of the target version."""
    target = jobs.target_version(cortex, rt.defaults)
    known = status.get("schemaVersion")
    decided = _policy(cortex, target, rt.defaults.schema_version, known, database_ready)
    if decided is not None:
        return decided
    name = n.job_name(cortex.meta.name, target)
    job = await rt.writer.get("batch/v1", "Job", cortex.meta.namespace, name)
    if job is None:
        job = await rt.writer.apply(jobs.build_migration_job(cortex, rt.defaults))
    failed = _job_condition(job, "Failed")
    if failed is not None:
        return await _failed(rt, cortex, job, failed, known)
    if _job_condition(job, "Complete") is not None:
        return SchemaOutcome(Observation.of("SchemaReady", True, "Migrated",
                                            f"Job {name} migrated the database to schema "
                                            f"version {target}"), target)
    return SchemaOutcome(Observation.of("SchemaReady", False, "Migrating",
                                        f"Job {name} is migrating to schema version {target}"),
                         known)
