"""Ready and the status fields: what the database, schema and server steps found, summed up.

The summary ``Ready`` is the first part that is not True (its reason and message), so
``kubectl get mcx`` says what the cortex waits for. ``Paused`` is reported False again
once a paused cortex is resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attested_cortex.builders import services
from attested_cortex.builders.conditions import Observation, ready
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.rules import summary_line
from attested_cortex.controller.memorycortex.database import DatabaseOutcome
from attested_cortex.controller.memorycortex.logicalbackup import LogicalBackupOutcome
from attested_cortex.controller.memorycortex.schema import SchemaOutcome
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


def fields(cortex: Cortex, satellites: Satellites, db: DatabaseOutcome,
           schema: SchemaOutcome) -> Object:
    """The status fields besides the conditions."""
    return {"databaseMode": database_mode(cortex), "primary": db.primary,
            "schemaVersion": schema.version, "kgBackend": BACKENDS[cortex.spec.graph.backend],
            "endpoint": services.endpoint(cortex), "connectionSecret": db.connection_secret,
            "ruleSummary": [summary_line(r) for r in satellites.rules],
            "hookCount": len(satellites.hooks), "identities": len(satellites.identities)}


async def report(rt: Runtime, cortex: Cortex, status: Mapping[str, Any],
                 satellites: Satellites, *, db: DatabaseOutcome, schema: SchemaOutcome,
                 server: Observation, logical_backup: LogicalBackupOutcome | None = None) -> None:
    """Write the conditions and fields (only if they changed)."""
    parts = [db.condition, schema.condition, server]
    observed = [*parts, ready(parts, ready_reason="CortexReady",
                              ready_message="database, schema and server are ready")]
    if db.storage is not None:  # not part of Ready: a volume still growing serves as before
        observed.append(db.storage)
    if logical_backup is not None and logical_backup.condition is not None:
        observed.append(logical_backup.condition)  # nor a failing backup
    if any(c.get("type") == "Paused" for c in status.get("conditions") or []):
        observed.append(Observation.of("Paused", False, "Reconciling", "spec.paused is false"))
    extra = {"logicalBackup": logical_backup.status} if logical_backup is not None else {}
    await write_status(rt.writer, kind=KIND, meta=cortex.meta, current=status,
                       observed=observed, fields={**fields(cortex, satellites, db, schema),
                                                  **extra})
