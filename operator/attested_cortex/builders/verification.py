"""The verified restore: the Job that proves a restored database before it serves, and
what its answer means (``DataVerified``, ``status.restore``). Pure.

A cortex whose database was restored (:func:`restores_data`: a ``cloudNativePG``
``bootstrap.recovery``, or a logical import of ``spec.restore.logical`` once its import Job
succeeded, ``builders/restores.py``) gets one Job,
``cortexctl audit verify --deep`` against the restored database, with the public keys the
server would trust (the cortex's ConfigMap, as the server mounts it) and the cortex's master
key ring (its ``<cortex>-master-key`` Secret, read-only, mode 0440), so it checks the
HMAC-keyed chain too (ADR 0051, ADR 0066): a restored chain whose events were appended by the
database role alone, or whose MACs another key made, does not serve. A restore into a cortex
of another name needs the source's master key Secret copied under the new name before the
cortex is applied (docs/keys.md); otherwise every MAC reads ``bad_mac``. The Job writes a
one-line JSON summary to its termination message; :func:`observe` turns it into the
condition. The server's Deployment is created only once ``DataVerified`` is True
(``controller/memorycortex/verification.py``): a chain that is broken or a row that differs
from its write record never serves, and ``Ready`` says ``RestoreNotVerified``.

The answer is kept in ``status.restore``, so the Job's TTL removing it changes nothing and
the verification never runs twice for one restore. A point-in-time restore keeps a prefix
of the source's chain: the summary names its last event (sequence and hash).

Only a verdict is final (ADR 0054). ``cortexctl audit verify`` exits 1 when the data does
not verify and 2 when it could not check (database unreachable, unreadable keys): the Job's
``podFailurePolicy`` fails the Job at once on exit 1, ignores a pod disrupted by the cluster
(evicted, preempted) and lets Kubernetes retry any other failure a few times;
:func:`data_failed` reads the verdict from the pod's exit code and summary, and anything
else that ends the Job (retries exhausted, the deadline) is ``VerificationError``: the
operator runs a new Job after :func:`retry_delay`, and the server stays down meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.builders import names, podparts, security, settings
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.builders.jobs import CORTEX_UID, cortex_image
from attested_cortex.crd import GROUP

Object = dict[str, Any]

TYPE: Final = "DataVerified"
#: Ready's reason (and DataVerified's) when the restored data does not verify.
NOT_VERIFIED: Final = "RestoreNotVerified"
KEYS_DIR: Final = "/keys"
TERMINATION_LOG: Final = "/dev/termination-log"
#: Exit codes of ``cortexctl audit verify``: the data does not verify / could not check.
DATA_FAILED_EXIT: Final = 1
COULD_NOT_CHECK_EXIT: Final = 2
#: Reason of DataVerified (and Ready) while the verifier could not reach a verdict.
VERIFICATION_ERROR: Final = "VerificationError"
#: Pods a Job may retry for a verifier that could not run (exit 2, killed); Kubernetes
#: backs off 10 s, 20 s. Exit 1 (the data) fails the Job at once: the same data fails the
#: same way.
BACKOFF_LIMIT: Final = 2
#: A Job that ended without a verdict is run again after 30 s, 60 s, ... at most 10 min.
RETRY_BASE_S: Final = 30.0
RETRY_CAP_S: Final = 600.0
ATTEMPT_ANNOTATION: Final = f"{GROUP}/verification-attempt"
TTL_SECONDS: Final = 24 * 3600
#: An hour for a large chain (the CLI allows an hour per statement).
DEADLINE_SECONDS: Final = 3600
SUMMARY_KEYS: Final = ("events", "memories", "links", "transcripts")


def restores_data(cortex: Cortex) -> bool:
    """Whether this cortex's database is a restore that must verify before it serves."""
    if cortex.spec.restore is not None and cortex.spec.restore.logical is not None:
        return True
    cnpg = cortex.spec.database.cloud_native_pg
    return cnpg is not None and cnpg.bootstrap is not None and cnpg.bootstrap.recovery is not None


def job_name(cortex: str) -> str:
    """The one verification Job of a restored cortex."""
    return f"{cortex}-verify-restore"


def retry_delay(attempt: int) -> float:
    """Seconds before the run after the ``attempt``-th Job that reached no verdict."""
    return min(RETRY_BASE_S * 2.0 ** max(attempt - 1, 0), RETRY_CAP_S)


def data_failed(exit_code: int | None, summary: Mapping[str, Any] | None) -> bool:
    """Whether a failed verifier's answer is a verdict on the data (final), rather than
    "could not check" (retried): exit 1 with a summary that names a mismatch."""
    return (exit_code == DATA_FAILED_EXIT and summary is not None
            and summary.get("ok") is False and "error" not in summary)


def _failure_policy() -> Object:
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "verify", "operator": "In",
                                              "values": [DATA_FAILED_EXIT]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                     "status": "True"}]}]}


def build_verification_job(cortex: Cortex, defaults: Defaults, attempt: int = 1) -> Object:
    """The Job running ``cortexctl audit verify --deep`` over the restored database
    (``attempt``: how many Jobs this restore has had, this one included)."""
    name = cortex.meta.name
    container = {
        "name": "verify", "image": cortex_image(cortex, defaults),
        "imagePullPolicy": defaults.image_pull_policy,
        "command": ["cortexctl"],
        "args": ["audit", "verify", "--deep", "--keys", KEYS_DIR,
                 "--master-key-dir", settings.MASTER_KEY_DIR, "--timeout", "60",
                 "--summary", TERMINATION_LOG],
        "env": [podparts.database_env(cortex)],
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "securityContext": security.container_security(),
        "volumeMounts": [{"name": "keys", "mountPath": KEYS_DIR, "readOnly": True},
                         {"name": "master-key", "mountPath": settings.MASTER_KEY_DIR,
                          "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }
    pod = {"metadata": {"labels": names.labels(name, "migration")},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": security.pod_security(user=CORTEX_UID, group=CORTEX_UID),
                    "containers": [container],
                    "volumes": [{"name": "keys", "configMap": {"name": names.config_name(name)}},
                                # The ring only (the Secret holds nothing else): the audit
                                # verifier derives the ``audit`` subkey of each version.
                                {"name": "master-key", "secret": {
                                    "secretName": names.master_key_secret_name(name),
                                    "defaultMode": 0o440}},
                                {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}}
    metadata = names.metadata(job_name(name), cortex.meta, component="migration")
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               ATTEMPT_ANNOTATION: str(attempt)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": BACKOFF_LIMIT, "podFailurePolicy": _failure_policy(),
                     "ttlSecondsAfterFinished": TTL_SECONDS,
                     "activeDeadlineSeconds": DEADLINE_SECONDS, "template": pod}}


@dataclass(frozen=True)
class Verdict:
    """DataVerified and ``status.restore`` (None while nothing is known yet)."""

    condition: Observation
    restore: Object | None

    @property
    def verified(self) -> bool:
        return self.condition.status == "True"


def parse_summary(message: str) -> Mapping[str, Any] | None:
    """The JSON summary the Job wrote, or None if its message is not one."""
    try:
        data = json.loads(message.strip().splitlines()[-1]) if message.strip() else None
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _counts(summary: Mapping[str, Any]) -> str:
    return ", ".join(f"{summary.get(k, 0)} {k}" for k in SUMMARY_KEYS)


def _restore(job: str, summary: Mapping[str, Any], verified: bool) -> Object:
    out: Object = {"verified": verified, "job": job,
                   **{k: summary.get(k) for k in SUMMARY_KEYS},
                   "signaturesChecked": summary.get("signatures_checked"),
                   "macsChecked": summary.get("macs_checked"),
                   "lastEvent": summary.get("last_event"), "headHash": summary.get("head_hash"),
                   "reachedAt": summary.get("last_event_at"),
                   "firstMismatch": summary.get("first_mismatch")}
    return {k: v for k, v in out.items() if v is not None}


def passed(job: str, summary: Mapping[str, Any]) -> Verdict:
    """The Job completed: the whole chain and every row verified."""
    last = summary.get("last_event")
    reached = summary.get("last_event_at")
    message = (f"Job {job} verified the restored data: {_counts(summary)}; chain intact from "
               f"event 1 to {last} (the last event kept, hash {summary.get('head_hash')}"
               + (f", written at {reached}: the point the restore reached" if reached else "")
               + f"), {summary.get('signatures_checked', 0)} signatures checked, "
               f"{summary.get('unverified', 0)} by agents whose keys this cortex does not hold")
    return Verdict(Observation.of(TYPE, True, "Verified", message), _restore(job, summary, True))


def failed(job: str, summary: Mapping[str, Any]) -> Verdict:
    """The verifier's verdict: the data does not verify (the first mismatch by id). Final."""
    message = (f"Job {job}: the restored data does not verify: first mismatch "
               f"{summary.get('first_mismatch')}; {summary.get('mismatch_count', 0)} "
               f"mismatches over {_counts(summary)}; the server is not started")
    return Verdict(Observation.of(TYPE, False, NOT_VERIFIED, message),
                   _restore(job, summary, False))


def could_not_verify(job: str, attempt: int, why: str, retry_at: str) -> Verdict:
    """The Job ended without a verdict (the database unreachable, the pod evicted, the
    deadline): not final, the verification runs again at ``retry_at``."""
    message = (f"Job {job} could not verify the restored data (attempt {attempt}): {why}; "
               f"it runs again at {retry_at}; the server is not started")
    return Verdict(Observation.of(TYPE, False, VERIFICATION_ERROR, message),
                   {"job": job, "attempts": attempt, "lastError": why[:1024],
                    "retryAt": retry_at})


def waiting(reason: str, message: str) -> Verdict:
    """Not decided yet (the database or schema is not ready, or the Job runs)."""
    return Verdict(Observation.of(TYPE, False, reason, message), None)


def remembered(restore: Mapping[str, Any] | None, conditions: list[Object]) -> Verdict | None:
    """The verdict already in status (the Job may be gone): it is never decided twice."""
    if not restore or "verified" not in restore:
        return None
    before = next((c for c in conditions if c.get("type") == TYPE), None)
    if before is None or before.get("reason") not in ("Verified", NOT_VERIFIED):
        return None
    return Verdict(Observation(TYPE, before["status"], before["reason"], before["message"]),
                   dict(restore))
