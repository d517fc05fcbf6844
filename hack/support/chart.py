"""The Helm chart installed into a running control plane: one release and who it runs as.

Callers: tests/chart/conftest.py and tests/operator/conftest.py (releases of the chart tests),
bench/operator.py (the chart installed for the operator benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hack.support.kube import Kube

CHART = Path(__file__).resolve().parents[2] / "charts" / "attested-cortex"


@dataclass(frozen=True)
class Release:
    """An installed release: its namespace, name and the operator's ServiceAccount user."""

    kube: Kube
    namespace: str
    name: str

    @property
    def service_account(self) -> str:
        return f"{self.name}-attested-cortex"

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def install(kube: Kube, name: str, namespace: str, *sets: str) -> Release:
    """Install the chart as release ``name``, waiting until its workloads are ready
    (``--take-ownership``: tests/crd may have applied the same CRDs first)."""
    flags = [arg for value in sets for arg in ("--set", value)]
    kube.helm(
        "install",
        name,
        str(CHART),
        "--namespace",
        namespace,
        "--take-ownership",
        "--wait",
        "--timeout=120s",
        *flags,
    )
    return Release(kube=kube, namespace=namespace, name=name)
