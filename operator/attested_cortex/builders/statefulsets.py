"""The managed database: one PostgreSQL 17 + Apache AGE pod with its data volume.

The image's entry point (images/postgres-age) initialises ``$PGDATA`` on first start from
``POSTGRES_PASSWORD_FILE``; the data directory is a sub-directory of the volume so a
filesystem's ``lost+found`` never stops ``initdb``. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders import names, security
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.builders.secrets import DB_NAME, DB_PORT, DB_USER, PASSWORD_KEY

Object = dict[str, Any]

POSTGRES_UID: Final = 999
DATA_MOUNT: Final = "/var/lib/postgresql/data"
PASSWORD_MOUNT: Final = "/etc/postgres-credentials"


def _probe(period: int, failures: int) -> Object:
    command = ["pg_isready", "-h", "127.0.0.1", "-p", str(DB_PORT), "-U", DB_USER, "-d", DB_NAME]
    return {"exec": {"command": command}, "periodSeconds": period, "timeoutSeconds": 5,
            "failureThreshold": failures}


def _container(cortex: Cortex, image: str, pull_policy: str) -> Object:
    managed = cortex.spec.database.managed
    env = [{"name": "POSTGRES_USER", "value": DB_USER},
           {"name": "POSTGRES_DB", "value": DB_NAME},
           {"name": "POSTGRES_PASSWORD_FILE", "value": f"{PASSWORD_MOUNT}/{PASSWORD_KEY}"},
           {"name": "PGDATA", "value": f"{DATA_MOUNT}/pgdata"}]
    mounts = [{"name": "data", "mountPath": DATA_MOUNT},
              {"name": "credentials", "mountPath": PASSWORD_MOUNT, "readOnly": True},
              {"name": "run", "mountPath": "/var/run/postgresql"},
              {"name": "tmp", "mountPath": "/tmp"}]
    return {"name": "postgres", "image": image, "imagePullPolicy": pull_policy,
            "args": ["postgres"], "env": env, "volumeMounts": mounts,
            "ports": [{"name": "postgres", "containerPort": DB_PORT, "protocol": "TCP"}],
            "readinessProbe": _probe(5, 3), "livenessProbe": _probe(20, 6),
            "startupProbe": _probe(5, 120),
            "resources": security.resources(managed.resources if managed else None),
            "securityContext": security.container_security()}


def _volume_claim(cortex: Cortex) -> Object:
    managed = cortex.spec.database.managed
    assert managed is not None
    spec: Object = {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": managed.storage.size}}}
    if managed.storage.storage_class_name:
        spec["storageClassName"] = managed.storage.storage_class_name
    return {"metadata": {"name": "data", "labels": names.labels(cortex.meta.name, "database")},
            "spec": spec}


def build_statefulset(cortex: Cortex, defaults: Defaults, *,
                      live_claim_template: Object | None = None) -> Object:
    """The database StatefulSet (one replica, ordered, a volume claim template).

    ``live_claim_template``: the existing StatefulSet's (``storage.live_template``), kept
    as it is because the API server refuses any change to it; storage.py grows the claim.
    """
    managed = cortex.spec.database.managed
    if managed is None:
        raise ValueError("build_statefulset needs spec.database.managed")
    name = cortex.meta.name
    image = managed.image or defaults.postgres_image
    volumes = [{"name": "credentials", "secret": {
                    "secretName": names.db_secret_name(name), "defaultMode": 0o440,
                    "items": [{"key": PASSWORD_KEY, "path": PASSWORD_KEY}]}},
               {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
               {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    pod = {"metadata": {"labels": names.labels(name, "database")},
           "spec": {"automountServiceAccountToken": False, "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": security.pod_security(user=POSTGRES_UID,
                                                             group=POSTGRES_UID),
                    "containers": [_container(cortex, image, defaults.image_pull_policy)],
                    "volumes": volumes}}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": names.metadata(names.db_name(name), cortex.meta, component="database"),
        "spec": {"replicas": 1, "serviceName": names.db_name(name),
                 "podManagementPolicy": "OrderedReady",
                 "updateStrategy": {"type": "RollingUpdate"},
                 "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain",
                                                          "whenScaled": "Retain"},
                 "selector": {"matchLabels": names.selector(name, "database")},
                 "template": pod,
                 "volumeClaimTemplates": [live_claim_template or _volume_claim(cortex)]},
    }
