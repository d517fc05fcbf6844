"""The schema migration Job: ``cortexctl migrate --target N``, one Job per target version.

The name carries the version, so a repeated reconcile finds the same Job and a new target
gets a new one; Jobs are immutable, and a finished one is removed by its TTL (status keeps
``schemaVersion``, so the operator never re-runs a version it saw succeed). Failures keep
the last log lines as the termination message, which the operator reports. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders import names, podparts, security
from attested_cortex.builders.inputs import Cortex, Defaults

Object = dict[str, Any]

BACKOFF_LIMIT: Final = 3
TTL_SECONDS: Final = 24 * 3600
DEADLINE_SECONDS: Final = 1800
#: How long the migration waits for a database that does not answer yet (a new Cluster's
#: read-write Service before its primary takes connections) before it fails its pod.
WAIT_SECONDS: Final = 300
CORTEX_UID: Final = 65532


def target_version(cortex: Cortex, defaults: Defaults) -> int:
    """``spec.schema.targetVersion``, or the newest this build knows."""
    return cortex.spec.schema_.target_version or defaults.schema_version


def cortex_image(cortex: Cortex, defaults: Defaults) -> str:
    """The cortex image of the server and of its migrations."""
    return cortex.spec.server.image or defaults.server_image


def build_migration_job(cortex: Cortex, defaults: Defaults) -> Object:
    """The Job migrating the database to :func:`target_version`."""
    version = target_version(cortex, defaults)
    meta = names.metadata(names.job_name(cortex.meta.name, version), cortex.meta,
                          component="migration")
    meta["annotations"] = {names.SCHEMA_VERSION_ANNOTATION: str(version)}
    container = {
        "name": "migrate", "image": cortex_image(cortex, defaults),
        "imagePullPolicy": defaults.image_pull_policy,
        "command": ["cortexctl"], "args": ["migrate", "--target", str(version),
                                           "--wait-seconds", str(WAIT_SECONDS)],
        "env": [podparts.database_env(cortex)],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "securityContext": security.container_security(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod = {"metadata": {"labels": names.labels(cortex.meta.name, "migration")},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": security.pod_security(user=CORTEX_UID, group=CORTEX_UID),
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"backoffLimit": BACKOFF_LIMIT, "ttlSecondsAfterFinished": TTL_SECONDS,
                     "activeDeadlineSeconds": DEADLINE_SECONDS, "template": pod}}
