"""Storage of the local control plane: a default StorageClass and static PersistentVolumes.

Callers: controlplane.py (creates them at start), tests/support/kube.py (``add_volumes``).
Pure builders over the API's JSON. The cluster has no volume provisioner, so a claim binds
only to a volume created beforehand, as on a bare-metal cluster with ``local`` storage: the
class ``local`` (no provisioner, ``Immediate`` binding, the default for claims that name no
class) and ``INITIAL_VOLUMES`` hostPath volumes of ``VOLUME_SIZE``. hostPath needs no node
affinity, so a claim binds before its pod is scheduled, on a kwok node or a real one (which
creates the directory under the control plane's directory on first mount).
Volumes are ``Retain``: a deleted claim leaves its volume Released, never reused, like
the data of a real cluster; tests that need more call ``Kube.add_volumes``.
"""

from __future__ import annotations

from pathlib import Path

STORAGE_CLASS = "local"
VOLUME_SIZE = "10Gi"
INITIAL_VOLUMES = 32
VOLUME_PREFIX = "local-pv-"
_LABELS = {"localkube.attested.dev/volume": "static"}


def storage_class(name: str = STORAGE_CLASS) -> dict[str, object]:
    """The cluster's default class: no provisioner, claims bind as soon as they are created."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }


def persistent_volume(name: str, *, directory: Path, size: str = VOLUME_SIZE,
                      storage_class_name: str = STORAGE_CLASS) -> dict[str, object]:
    """One ReadWriteOnce hostPath volume of ``size`` in ``storage_class_name``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": _LABELS},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class_name,
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(directory / name), "type": "DirectoryOrCreate"},
        },
    }


def initial_volumes(directory: Path) -> list[dict[str, object]]:
    """The volumes created at start: ``local-pv-000`` ... in the default class."""
    return [persistent_volume(f"{VOLUME_PREFIX}{index:03d}", directory=directory)
            for index in range(INITIAL_VOLUMES)]
