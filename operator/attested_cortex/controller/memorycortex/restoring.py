"""The import step of a logical restore (``spec.restore.logical``), before the verification.

Called by :mod:`.reconciling` after the schema step. A cortex that is not a logical restore
passes at once. Otherwise a chain of policies, first match wins: the import already
recorded in ``status.restore`` (``source``: never imported twice, whatever became of the
Job) or a verdict already decided; the schema not ready (the verification step says so);
then the Job (``builders/restores.py``): absent (create it), running, failed (a refused
bundle is final: ``RestoreNotVerified``; anything else ``ImportFailed``), complete (record
it; the verification Job follows in the same pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.builders import restores
from attested_cortex.builders import verification as v
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.memorycortex.verification import finished, terminated
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
#: Pods are not watched: while the Job runs, look at it this often (reads only).
RUNNING_POLL_S: Final = 5.0


@dataclass(frozen=True)
class ImportOutcome:
    """Whether the data is in; the import's record for ``status.restore``; a verdict that
    stands in for the verification's while the import is not done (None: none)."""

    done: bool
    record: Object | None = None
    verdict: v.Verdict | None = None
    retry_in: float | None = None


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], *,
                 schema_ready: bool) -> ImportOutcome:
    """Create or follow the import Job of a logical restore."""
    if restores.restore_spec(cortex) is None:
        return ImportOutcome(done=True)
    kept = status.get("restore") or {}
    record = {k: kept[k] for k in ("source", "importJob") if k in kept} or None
    if kept.get("source") or v.remembered(kept, status.get("conditions") or []) is not None:
        return ImportOutcome(done=True, record=record)
    if not schema_ready:
        return ImportOutcome(done=False)
    name = restores.job_name(cortex.meta.name)
    job = await rt.writer.get("batch/v1", "Job", cortex.meta.namespace, name)
    if job is None:
        job = await rt.writer.apply(restores.build_import_job(cortex, rt.defaults))
    return await _from_job(rt, cortex, job)


async def _from_job(rt: Runtime, cortex: Cortex, job: Object) -> ImportOutcome:
    name = job["metadata"]["name"]
    done, failed = finished(job, "Complete"), finished(job, "Failed")
    if done is None and failed is None:
        return ImportOutcome(False, verdict=restores.importing(name), retry_in=RUNNING_POLL_S)
    words = (await terminated(rt, cortex, name))[1].strip()
    summary = v.parse_summary(words)
    if done is not None and summary is not None and summary.get("ok") is True:
        return ImportOutcome(True, record=restores.imported(name, summary))
    if done is not None:  # complete, its report not readable yet
        return ImportOutcome(False, verdict=restores.importing(name), retry_in=RUNNING_POLL_S)
    if summary is not None and summary.get("refused"):
        return ImportOutcome(False, verdict=restores.refused(name, summary))
    why = (summary or {}).get("error") or words[-1000:] or str((failed or {}).get("message") or "")
    return ImportOutcome(False, verdict=restores.could_not_run(name, str(why) or "no report"))
