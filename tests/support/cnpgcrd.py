"""CloudNativePG's Cluster CRD, from the release manifest its Go module ships.

Callers: tests/builders/test_clusters.py (the builder's output validated against the CRD's
OpenAPI schema), tests/operator/test_cloudnativepg.py and tests/chart/test_rbac.py (the
CRDs alone installed on the control plane: no CloudNativePG operator runs there). The
module comes from the Go module cache, where ``make deps`` puts it (tests/support/gomodules.py;
a test without it skips, naming that): the same module hack/k8s/ensure-binaries.sh builds the
operator from.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Final

import yaml
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from attested_cortex.controller.memorycortex.cloudnativepg import RELEASE
from tests.support.gomodules import CNPG, module_dir

CRD_NAME: Final = "clusters.postgresql.cnpg.io"
Object = dict[str, Any]


@functools.cache
def release_manifest() -> Path:
    """``releases/cnpg-<version>.yaml`` of the tested CloudNativePG version."""
    return module_dir(*CNPG) / "releases" / f"cnpg-{RELEASE}.yaml"


@functools.cache
def all_crds() -> tuple[Object, ...]:
    """Every CustomResourceDefinition of that release (Cluster, Backup, Pooler, ...)."""
    with release_manifest().open() as stream:
        return tuple(d for d in yaml.safe_load_all(stream)
                     if d and d.get("kind") == "CustomResourceDefinition")


def cluster_crd() -> Object:
    """The ``clusters.postgresql.cnpg.io`` CustomResourceDefinition of that release."""
    for crd in all_crds():
        if crd["metadata"]["name"] == CRD_NAME:
            return crd
    raise AssertionError(f"{release_manifest()} holds no {CRD_NAME} CRD")


def install(kube: Kube, *crds: Object) -> None:
    """Apply CRDs (CloudNativePG's alone: no operator of theirs) and wait until served."""
    kube.kubectl("apply", "--server-side", "-f", "-",
                 input="\n---\n".join(yaml.safe_dump(crd) for crd in crds))

    def established() -> bool:
        for crd in crds:
            live = json.loads(kube.kubectl("get", "crd", crd["metadata"]["name"],
                                           "-o", "json").stdout)
            if not any(c["type"] == "Established" and c["status"] == "True"
                       for c in (live.get("status") or {}).get("conditions") or []):
                return False
        return True
    wait_until(established, what="CloudNativePG's CRDs established", seconds=60,
               interval_s=0.2)


def cluster_schema() -> Object:
    """The ``openAPIV3Schema`` of the served version (v1)."""
    version = next(v for v in cluster_crd()["spec"]["versions"] if v["name"] == "v1")
    schema: Object = version["schema"]["openAPIV3Schema"]
    return schema
