"""Pytest plugin: CloudNativePG installed on the real node, as a platform team installs it.

Registered by e2e/conftest.py. ``cnpg`` (session scope) applies the release manifest of the
version in hack/k8s/versions.env, pointed at our images by hack/cnpg.py, with
``kubectl apply --server-side`` (what CNPG's docs say), then waits for what a user waits for:
the operator Deployment Available, and its admission webhooks answering a dry-run Cluster, which
proves the API server reaches the manager's pod IP through the node bridge with the CA the
manager injected. The manager and its image are built by ``make node-deps``
(hack/k8s/ensure-binaries.sh cnpg, hack/images/build.sh), which the real node's fixture refreshes
first; a missing piece fails here loudly, naming the command.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hack import cnpg as cnpg_install
from hack.k8s.localkube import binaries
from hack.k8s.localkube.realnode_cli import images_dir
from hack.support.waiting import wait_until

from tests.support.realnode import RealCluster

#: Cold on the 2-core machine: the manager's pod starts and writes its webhook certificates.
INSTALL_S = 240.0


@dataclass(frozen=True)
class CloudNativePG:
    """CNPG as installed: its version, the manifest applied and an installer to undo it."""

    version: str
    manifest: Path
    installer: cnpg_install.Installer
    seconds: float

    def install(self) -> float:
        """Apply and wait until usable; returns the seconds it took."""
        return install(self.installer)

    def uninstall(self) -> None:
        self.installer.uninstall()


def install(installer: cnpg_install.Installer) -> float:
    began = time.monotonic()
    installer.apply()
    wait_until(installer.deployment_available, seconds=INSTALL_S,
               what=f"deployment {cnpg_install.DEPLOYMENT} Available")
    wait_until(installer.webhooks_answer, seconds=INSTALL_S,
               what="CNPG's admission webhooks answering a dry-run Cluster")
    return round(time.monotonic() - began, 1)


def installer_for(cluster: RealCluster) -> cnpg_install.Installer:
    """An installer bound to the node's kubectl (fails the test when CNPG is not built)."""
    bin_dir = binaries.bin_dir()
    version = cnpg_install.version()
    if not (images_dir() / "cnpg.tar").is_file():
        pytest.fail("CloudNativePG's image is not built: run make node-deps "
                    "(hack/k8s/ensure-binaries.sh cnpg, then hack/images/build.sh)",
                    pytrace=False)
    manifest = cnpg_install.local_manifest(bin_dir, version)

    def kubectl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(*args, input=input, check=False)

    return cnpg_install.Installer(kubectl=kubectl, manifest=manifest)


@pytest.fixture(scope="session")
def cnpg(real_node: RealCluster) -> Iterator[CloudNativePG]:
    """CloudNativePG installed on the session's real node (and left for the node's stop)."""
    installer = installer_for(real_node)
    seconds = install(installer)
    yield CloudNativePG(version=cnpg_install.version(), manifest=installer.manifest,
                        installer=installer, seconds=seconds)
