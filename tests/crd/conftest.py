"""Fixtures for CRD tests against the real API server: the CRDs installed, a namespace.

The CRDs are applied with server-side apply and ``--force-conflicts`` so that these tests
and the chart tests (which let Helm take the same CRDs over) can run in any order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from attested_cortex.crd import KINDS

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"


def install_crds(kube: Kube) -> None:
    """Apply the checked-in CRDs and wait until the API server serves them."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    names = [kind.crd_name for kind in KINDS]
    # Not `kubectl wait`: it fails at once ("accessor error") on a CRD whose status has no
    # conditions yet, which a just-applied CRD can show for a moment.
    established = ('{range .items[*]}{.status.conditions[?(@.type=="Established")].status}'
                   ' {end}')

    def all_established() -> bool:
        out = kube.kubectl("get", "crd", *names, "-o", f"jsonpath={established}").stdout
        return out.split() == ["True"] * len(names)

    wait_until(all_established, seconds=60, what="the CRDs established")


@pytest.fixture(scope="module")
def crds(kube: Kube) -> Kube:
    """The control plane with the four CRDs established."""
    install_crds(kube)
    return kube


@pytest.fixture(scope="module")
def namespace(crds: Kube) -> Iterator[str]:
    """One namespace for a module's objects, deleted (without waiting) afterwards."""
    name = f"crd-{uuid.uuid4().hex[:10]}"
    crds.kubectl("create", "namespace", name)
    yield name
    crds.kubectl("delete", "namespace", name, "--wait=false", check=False)
