"""DataVerified: the gate between a restored database and the server (issue 24).

Called by :mod:`.reconciling` after the schema step, for every cortex; a cortex that does
not restore data (``builders/verification.restores_data``) passes at once and reports
nothing. For one that does, a chain of policies, first match wins: the verdict already in
``status.restore`` (decided once, kept when the Job's TTL removes it); the schema not ready
(wait); then the Job: absent (create it, unless a retry is not due yet), complete (the
counts and the last event kept), failed with a verdict on the data (the first mismatch by
id: final), failed without one (``VerificationError``: the Job is deleted once its retry is
due and a new one runs; ADR 0054), or running. The server step is told to create the
Deployment only once this returns a verified verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
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


async def terminated(rt: Runtime, cortex: Cortex, job_name: str) -> tuple[int | None, str]:
    """A Job's container exit code and termination message (the summary the verify or the
    import command wrote), of the Job's newest pod that has one (``restoring.py`` reads the
    import's)."""
    pods = await rt.writer.list("v1", "Pod", cortex.meta.namespace, f"job-name={job_name}")
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""),
                      reverse=True):
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (status.get("state") or {}).get("terminated") or {}
            if ended.get("message") or ended.get("exitCode") is not None:
                code = ended.get("exitCode")
                return (int(code) if code is not None else None), str(ended.get("message") or "")
    return None, ""


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _attempt(job: Object) -> int:
    annotations = job["metadata"].get("annotations") or {}
    try:
        return max(int(annotations.get(v.ATTEMPT_ANNOTATION, "1")), 1)
    except ValueError:
        return 1


async def _unverified(rt: Runtime, job: Object, failed: Object,
                      summary: Mapping[str, Any] | None) -> tuple[v.Verdict, float]:
    """A Job that ended without a verdict: report it, and once its retry is due delete it
    (the next pass, told by the deletion, creates the next attempt)."""
    name, attempt = job["metadata"]["name"], _attempt(job)
    why = str((summary or {}).get("error") or failed.get("message") or failed.get("reason")
              or "the verifier ended without a report")
    ended = _stamp(str(failed.get("lastTransitionTime") or _iso(datetime.now(UTC))))
    due = ended + timedelta(seconds=v.retry_delay(attempt))
    verdict = v.could_not_verify(name, attempt, why, _iso(due))
    wait = (due - datetime.now(UTC)).total_seconds()
    if wait > 0:
        return verdict, wait
    await rt.writer.delete("batch/v1", "Job", job["metadata"]["namespace"], name)
    return verdict, 1.0


async def _from_job(rt: Runtime, cortex: Cortex, job: Object) -> tuple[v.Verdict, float | None]:
    name = job["metadata"]["name"]
    done, failed = finished(job, "Complete"), finished(job, "Failed")
    if done is None and failed is None:
        return v.waiting("Verifying", f"Job {name} is verifying the restored data (the "
                         "audit chain and every row against its write record)"), RUNNING_POLL_S
    code, message = await terminated(rt, cortex, name)
    summary = v.parse_summary(message)
    if done is not None and summary is not None and summary.get("ok") is True:
        return v.passed(name, summary), None
    if done is not None:  # complete, message not there yet
        return v.waiting("Verifying", f"Job {name} finished; reading its report"), RUNNING_POLL_S
    assert failed is not None
    if summary is not None and v.data_failed(code, summary):
        return v.failed(name, summary), None
    return await _unverified(rt, job, failed, summary)


def _retry_pending(restore: Mapping[str, Any] | None) -> tuple[v.Verdict, float] | None:
    """The last Job reached no verdict and its successor is not due yet."""
    if not restore or not restore.get("retryAt"):
        return None
    wait = (_stamp(str(restore["retryAt"])) - datetime.now(UTC)).total_seconds()
    if wait <= 0:
        return None
    verdict = v.could_not_verify(str(restore.get("job")), int(restore.get("attempts") or 1),
                                 str(restore.get("lastError") or ""), str(restore["retryAt"]))
    return verdict, wait


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any], *,
                 schema_ready: bool) -> tuple[v.Verdict | None, float | None]:
    """The verdict (None: nothing to verify) and when to look again."""
    if not v.restores_data(cortex):
        return None, None
    restore = status.get("restore")
    kept = v.remembered(restore, status.get("conditions") or [])
    if kept is not None:
        return kept, None
    if not schema_ready:
        return v.waiting("WaitingForSchema", "the restored data is verified once the "
                         "database is restored and its schema is current"), None
    name = v.job_name(cortex.meta.name)
    job = await rt.writer.get("batch/v1", "Job", cortex.meta.namespace, name)
    if job is None:
        if (pending := _retry_pending(restore)) is not None:
            return pending
        attempt = int((restore or {}).get("attempts") or 0) + 1
        job = await rt.writer.apply(v.build_verification_job(cortex, rt.defaults, attempt))
    elif job["metadata"].get("deletionTimestamp"):
        return v.waiting(v.VERIFICATION_ERROR, f"Job {name} is being deleted before the next "
                         "attempt"), RUNNING_POLL_S
    return await _from_job(rt, cortex, job)
