"""The logical restore of ``spec.restore.logical``: the import Job and the reading of its
report. Pure (ADR 0052).

A new cortex made from a logical bundle gets, after its migration Job, one Job
``<cortex>-import-restore``: ``cortexctl import --from s3://bucket/path[/bundle]`` into the
empty database, every digest, the chain and every signature verified under the bundle's
keys before anything is visible (ADR 0034), all or nothing. Then the verification Job of
``builders/verification.py`` proves the rows with this cortex's own keys, and the server is
created only after both (the same gate as a physical restore, ADR 0039).

The import runs with ``--already-ok``: a second run (status lost, the Job recreated) finds
the bundle's chain already there and reports it, never imports twice; the operator records
the import in ``status.restore.source`` once the Job succeeded. A bundle the import refuses
(exit 1) fails the Job at once (``podFailurePolicy``) and is final; anything else (the
store or the database unreachable) is retried by the Job a few times. Called by
``controller/memorycortex/restoring.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attested_cortex.attest.keyfiles import PUBLIC_FILE
from attested_cortex.builders import logicalbackups, names, security
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.builders.jobs import CORTEX_UID, cortex_image
from attested_cortex.builders.verification import NOT_VERIFIED, TYPE, Verdict, waiting
from attested_cortex.crd.logicalbackups import LogicalRestoreSpec

Object = dict[str, Any]

TERMINATION_LOG: Final = "/dev/termination-log"
#: Transient failures (store or database away) are retried; a refused bundle is not.
BACKOFF_LIMIT: Final = 3
#: ``cortexctl import``'s exit code for a bundle or target it refuses.
REFUSED_EXIT: Final = 1
TTL_SECONDS: Final = 24 * 3600
DEADLINE_SECONDS: Final = 6 * 3600
#: Ready's reason while the import cannot run (not a verdict on the data: it may be retried).
IMPORT_FAILED: Final = "ImportFailed"
#: Where ``signer.secretRef``'s public key is mounted in the import Job.
SIGNER_DIR: Final = "/etc/cortex/source-signer"


def restore_spec(cortex: Cortex) -> LogicalRestoreSpec | None:
    """``spec.restore.logical``, or None for a cortex that is not a logical restore."""
    return cortex.spec.restore.logical if cortex.spec.restore is not None else None


def job_name(cortex: str) -> str:
    """The one import Job of a logically restored cortex."""
    return f"{cortex}-import-restore"


def location(cortex: Cortex, spec: LogicalRestoreSpec) -> str:
    """``s3://bucket/path[/bundle]``: the path defaults to ``<namespace>/<sourceCortex>``
    (where the source's ``spec.backup.logical`` put them); ``latest`` names no folder."""
    path = (spec.object_store.path or "").strip("/") or (
        f"{cortex.meta.namespace}/{spec.source_cortex}")
    folder = "" if spec.bundle == "latest" else f"/{spec.bundle}"
    return f"s3://{spec.object_store.bucket}/{path}{folder}"


def _args(cortex: Cortex, spec: LogicalRestoreSpec) -> list[str]:
    args = ["import", "--from", location(cortex, spec), "--already-ok", "--json",
            "--summary", TERMINATION_LOG]
    if spec.require_signature:
        args.append("--require-signature")
    if spec.signer is not None:
        args += ["--signer", spec.signer.key_id or f"{SIGNER_DIR}/{PUBLIC_FILE}"]
    return args


def _signer_volumes(spec: LogicalRestoreSpec) -> tuple[list[Object], list[Object]]:
    """The pinned signer's ``public.pem``, alone, from ``signer.secretRef`` (ADR 0064): the
    source's audit signer Secret also holds its private key, which the import never needs."""
    if spec.signer is None or spec.signer.secret_ref is None:
        return [], []
    volume = {"name": "source-signer", "secret": {
        "secretName": spec.signer.secret_ref.name, "defaultMode": 0o444,
        "items": [{"key": PUBLIC_FILE, "path": PUBLIC_FILE}]}}
    return [volume], [{"name": "source-signer", "readOnly": True, "mountPath": SIGNER_DIR}]



def build_import_job(cortex: Cortex, defaults: Defaults) -> Object:
    """The Job importing ``spec.restore.logical``'s bundle into the new, empty database."""
    spec = restore_spec(cortex)
    if spec is None:
        raise ValueError("spec.restore.logical is not set")
    name = cortex.meta.name
    signer_volumes, signer_mounts = _signer_volumes(spec)
    container = {
        "name": "import", "image": cortex_image(cortex, defaults),
        "imagePullPolicy": defaults.image_pull_policy,
        "command": ["cortexctl"], "args": _args(cortex, spec),
        "env": logicalbackups.object_store_env(cortex, spec.object_store),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "1Gi"}},
        "securityContext": security.container_security(),
        # The bundle is downloaded here: it needs room for the whole bundle.
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *signer_mounts],
    }
    pod = {"metadata": {"labels": names.labels(name, "migration")},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": security.pod_security(user=CORTEX_UID, group=CORTEX_UID),
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {}}, *signer_volumes]}}
    refused = {"action": "FailJob", "onExitCodes": {
        "containerName": "import", "operator": "In", "values": [REFUSED_EXIT]}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": names.metadata(job_name(name), cortex.meta, component="migration"),
            "spec": {"backoffLimit": BACKOFF_LIMIT, "ttlSecondsAfterFinished": TTL_SECONDS,
                     "activeDeadlineSeconds": DEADLINE_SECONDS,
                     "podFailurePolicy": {"rules": [refused]}, "template": pod}}


def imported(job: str, summary: Mapping[str, Any]) -> Object:
    """What ``status.restore`` records of a finished import (kept: never imported twice)."""
    return {"source": str(summary.get("source") or ""), "importJob": job}


def importing(job: str) -> Verdict:
    """The import Job runs (DataVerified waits; no server)."""
    return waiting("Importing", f"Job {job} is importing the bundle (every digest, the chain "
                   "and every signature are verified before anything is visible)")


def refused(job: str, summary: Mapping[str, Any]) -> Verdict:
    """The import refused the bundle (or the target): final, nothing was imported."""
    what = f"{summary.get('code')} at {summary.get('where')}"
    message = (f"Job {job} refused the bundle {summary.get('source') or ''}, nothing "
               f"imported: {summary.get('message') or what}; the server is not started")
    return Verdict(Observation.of(TYPE, False, NOT_VERIFIED, message),
                   {"verified": False, "importJob": job, "firstMismatch": what[:1024],
                    **({"source": str(summary["source"])} if summary.get("source") else {})})


def could_not_run(job: str, why: str) -> Verdict:
    """The import Job failed without a verdict on the bundle (the store or the database
    could not be reached, the deadline): not final; deleting the Job tries again."""
    return waiting(IMPORT_FAILED, f"Job {job} could not import the bundle: {why[:900]} "
                   f"(nothing was imported; delete the Job to try again)")
