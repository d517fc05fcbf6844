"""Ready and the status fields: what the database, schema and server steps found, summed up.

The summary ``Ready`` is the first part that is not True (its reason and message), so
``kubectl get mcx`` says what the cortex waits for. A restored cortex's ``DataVerified``
is one of the parts (before the server: ``RestoreNotVerified`` is what Ready says when the
restored data does not verify); ``BackupHealthy`` is not (a cortex whose object store is
down keeps serving). ``Paused`` is reported False again once a paused cortex is resumed.
A backup section removed from the spec takes its condition and status field with it
(:func:`unasked`): a stale BackupHealthy would describe backups that no longer run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attested_cortex.builders import services
from attested_cortex.builders.backupstates import TYPE as BACKUP_HEALTHY
from attested_cortex.builders.conditions import Observation, ready
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.rules import summary_line
from attested_cortex.builders.verification import Verdict
from attested_cortex.builders.witnessstates import CONDITION as AUDIT_WITNESSED
from attested_cortex.controller.memorycortex.backup import BackupOutcome
from attested_cortex.controller.memorycortex.database import DatabaseOutcome
from attested_cortex.controller.memorycortex.logicalbackup import (
    CONDITION as LOGICAL_BACKUP_HEALTHY,
)
from attested_cortex.controller.memorycortex.logicalbackup import LogicalBackupOutcome
from attested_cortex.controller.memorycortex.schema import SchemaOutcome
from attested_cortex.controller.memorycortex.witnesses import WitnessOutcome
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND: Final = "MemoryCortex"
#: What the server will use: Auto picks CTE (ADR 0003).
BACKENDS: Final = {"AGE": "age", "CTE": "cte", "Auto": "cte"}

Object = dict[str, Any]


def database_mode(cortex: Cortex) -> str:
    """Managed, External or CloudNativePG (the ``kubectl get mcx`` column)."""
    wanted = cortex.spec.database
    if wanted.cloud_native_pg is not None:
        return "CloudNativePG"
    return "External" if wanted.external is not None else "Managed"


def unasked(cortex: Cortex) -> tuple[list[str], Object]:
    """The backup conditions and status fields of sections the spec does not have (a None
    field is removed)."""
    cnpg = cortex.spec.database.cloud_native_pg
    conditions: list[str] = []
    gone: Object = {}
    if cnpg is None or cnpg.backup is None:
        conditions.append(BACKUP_HEALTHY)
        gone["backup"] = None
    if cortex.spec.backup.logical is None:
        conditions.append(LOGICAL_BACKUP_HEALTHY)
        gone["logicalBackup"] = None
    return conditions, gone


def fields(cortex: Cortex, satellites: Satellites, db: DatabaseOutcome,
           schema: SchemaOutcome, backup: BackupOutcome | None = None,
           verdict: Verdict | None = None) -> Object:
    """The status fields besides the conditions (``backup`` and ``restore`` only where the
    cortex has them: a field left out keeps its value)."""
    out = _fields(cortex, satellites, db, schema)
    if backup is not None and backup.fields is not None:
        out["backup"] = backup.fields
    if verdict is not None and verdict.restore is not None:
        out["restore"] = verdict.restore
    return out


def _fields(cortex: Cortex, satellites: Satellites, db: DatabaseOutcome,
            schema: SchemaOutcome) -> Object:
    return {"databaseMode": database_mode(cortex), "primary": db.primary,
            "schemaVersion": schema.version, "kgBackend": BACKENDS[cortex.spec.graph.backend],
            "endpoint": services.endpoint(cortex), "connectionSecret": db.connection_secret,
            "ruleSummary": [summary_line(r) for r in satellites.rules],
            "hookCount": len(satellites.hooks), "identities": len(satellites.identities)}


async def report(rt: Runtime, cortex: Cortex, status: Mapping[str, Any],
                 satellites: Satellites, *, db: DatabaseOutcome, schema: SchemaOutcome,
                 server: Observation, backup: BackupOutcome | None = None,
                 verdict: Verdict | None = None,
                 logical_backup: LogicalBackupOutcome | None = None,
                 witnessed: WitnessOutcome | None = None) -> None:
    """Write the conditions and fields (only if they changed)."""
    verified = [verdict.condition] if verdict is not None else []
    parts = [db.condition, schema.condition, *verified, server]
    observed = [*parts, ready(parts, ready_reason="CortexReady",
                              ready_message="database, schema and server are ready")]
    if db.storage is not None:  # not part of Ready: a volume still growing serves as before
        observed.append(db.storage)
    if backup is not None and backup.condition is not None:  # nor is an object store down
        observed.append(backup.condition)
    if logical_backup is not None and logical_backup.condition is not None:
        observed.append(logical_backup.condition)  # nor a failing backup
    if witnessed is not None and witnessed.condition is not None:
        observed.append(witnessed.condition)  # nor a refusing witness (ADR 0102)
    if any(c.get("type") == "Paused" for c in status.get("conditions") or []):
        observed.append(Observation.of("Paused", False, "Reconciling", "spec.paused is false"))
    extra = {"logicalBackup": logical_backup.status} if logical_backup is not None else {}
    dropped, gone = unasked(cortex)
    if witnessed is not None and witnessed.condition is None:
        dropped.append(AUDIT_WITNESSED)
    if witnessed is not None:
        extra["audit"] = witnessed.status  # None removes it
    await write_status(rt.writer, kind=KIND, meta=cortex.meta, current=status,
                       observed=observed, dropped=dropped,
                       fields={**fields(cortex, satellites, db, schema, backup, verdict),
                               **extra, **gone})
