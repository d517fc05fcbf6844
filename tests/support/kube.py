"""Pytest plugin: a real local Kubernetes control plane, started once per session on demand.

Registered by tests/conftest.py. Tests that ask for ``kube`` (mark them ``pytest.mark.kube``)
get etcd, kube-apiserver (RBAC on), controller-manager, scheduler and a kwok fake node, built
by hack/k8s/ensure-binaries.sh and started by hack/k8s/localkube. Nothing starts unless a
test asks. A missing binary fails loudly; it is never a skip.

    def test_something(kube: Kube, kube_namespace: str) -> None:
        kube.kubectl("apply", "-n", kube_namespace, "-f", "-", input=manifest)

The cluster has a default StorageClass ``local`` and 32 static 10Gi volumes (claims bind to
them; ``kube.add_volumes`` makes more), and kwok pods owned by a Job succeed unless annotated
``kwok.attested.dev/fail: "true"`` (``FAIL_ANNOTATION``), then they fail with exit code 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.k8s.localkube import ControlPlane, ControlPlaneError, binaries
from hack.support.kube import Kube


def _bin_dir_or_fail() -> Path:
    bin_dir = binaries.bin_dir()
    missing = binaries.missing(bin_dir)
    if missing:
        pytest.fail(f"Kubernetes binaries missing from {bin_dir}: {', '.join(missing)}. "
                    "Build them with hack/k8s/ensure-binaries.sh (make deps does).",
                    pytrace=False)
    return bin_dir


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The session's control plane, started the first time a test asks for it."""
    plane = ControlPlane(bin_dir=_bin_dir_or_fail())
    try:
        plane.start()
    except ControlPlaneError as error:
        pytest.fail(f"local control plane failed to start: {error}", pytrace=False)
    try:
        yield Kube(kubeconfig=plane.kubeconfig, bin_dir=plane.bin_dir, server=plane.server,
                   home=tmp_path_factory.mktemp("kube-clients"),
                   volume_directory=plane.volume_directory)
    finally:
        plane.stop()


@pytest.fixture
def kube_namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)
