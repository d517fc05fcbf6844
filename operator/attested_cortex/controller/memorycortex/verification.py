"""DataVerified: the gate between a restored database and the server (issue 24).

Called by :mod:`.reconciling` after the schema step, for every cortex; a cortex that does
not restore data (``builders/verification.restores_data``) passes at once and reports
nothing. For one that does, a chain of policies, first match wins: the verdict already in
``status.restore`` (decided once, kept when the Job's TTL removes it); the schema not ready
(wait); then the Job: absent (create it), failed (its summary: the first mismatch by id),
complete (the counts and the last event kept), or running. The server step is told to
create the Deployment only once this returns a verified verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attested_cortex.builders import verification as v
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
#: Pods are not watched: while the Job runs, look at it this often (reads only).
RUNNING_POLL_S: Final = 5.0


def finished(job: Object, type_: str) -> Object | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


async def termination_message(rt: Runtime, cortex: Cortex, job_name: str) -> str:
    """A Job's container termination message, whole (the summary the verify or the import
    command wrote; ``restoring.py`` reads the import's)."""
    pods = await rt.writer.list("v1", "Pod", cortex.meta.namespace, f"job-name={job_name}")
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""),
                      reverse=True):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            message = ((status.get("state") or {}).get("terminated") or {}).get("message")
            if message:
                return str(message)
    return ""


async def _from_job(rt: Runtime, cortex: Cortex, job: Object) -> tuple[v.Verdict, float | None]:
    name = job["metadata"]["name"]
    done, failed = finished(job, "Complete"), finished(job, "Failed")
    if done is None and failed is None:
        return v.waiting("Verifying", f"Job {name} is verifying the restored data (the "
                         "audit chain and every row against its write record)"), RUNNING_POLL_S
    summary = v.parse_summary(await termination_message(rt, cortex, name))
    if done is not None and summary is not None and summary.get("ok") is True:
        return v.passed(name, summary), None
    if summary is None and failed is None:  # complete, message not there yet
        return v.waiting("Verifying", f"Job {name} finished; reading its report"), RUNNING_POLL_S
    why = (failed or {}).get("message") or "no report"
    return v.failed(name, summary, str(why)), None


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], *,
                 schema_ready: bool) -> tuple[v.Verdict | None, float | None]:
    """The verdict (None: nothing to verify) and when to look again."""
    if not v.restores_data(cortex):
        return None, None
    kept = v.remembered(status.get("restore"), status.get("conditions") or [])
    if kept is not None:
        return kept, None
    if not schema_ready:
        return v.waiting("WaitingForSchema", "the restored data is verified once the "
                         "database is restored and its schema is current"), None
    name = v.job_name(cortex.meta.name)
    job = await rt.writer.get("batch/v1", "Job", cortex.meta.namespace, name)
    if job is None:
        job = await rt.writer.apply(v.build_verification_job(cortex, rt.defaults))
    return await _from_job(rt, cortex, job)
