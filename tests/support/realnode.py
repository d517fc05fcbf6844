"""Pytest plugin: the real one-node cluster (containerd + runc pods), gated on its caches.

Registered by tests/conftest.py. Tests marked ``realnode`` ask for ``real_node`` and get a
cluster whose pods really run: kubelet, kube-proxy, CoreDNS and containerd on this host
(hack/k8s/localkube/realnode.py), the images of hack/images/build.sh loaded. The node's
binaries and images are opt-in (``make node-deps``, a cold build of several minutes), so the
gate is: when they exist (and we are root), the tests run (after refreshing whatever the
working tree changed: hack/images/build.sh rebuilds the cortex image after a code change);
when they do not, every ``realnode`` test is skipped and the session ends with a loud banner
that says what is missing and which command builds it. A node that exists but fails to
start is a failure.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hack.k8s.localkube import binaries
from hack.k8s.localkube.nodeconfig import NODE_NAME
from hack.k8s.localkube.realnode import RealNode, RealNodeError
from hack.k8s.localkube.realnode_cli import IMAGES_SCRIPT, images_dir
from hack.support.kube import Kube
from hack.support.realnode import missing_pieces

_SKIPPED: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("realnode")]
    if not marked:
        return
    reasons = missing_pieces()
    if not reasons:
        return
    skip = pytest.mark.skip(reason="real node not built: " + "; ".join(reasons))
    for item in marked:
        item.add_marker(skip)
    _SKIPPED.extend([f"{len(marked)} real-node tests SKIPPED", *reasons,
                     "build them with: make node-deps"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SKIPPED:
        bar = "!" * 78
        terminalreporter.write_line(bar, red=True, bold=True)
        for line in _SKIPPED:
            terminalreporter.write_line(f"!!! {line}", red=True, bold=True)
        terminalreporter.write_line(bar, red=True, bold=True)


@dataclass(frozen=True)
class RealCluster(Kube):
    """A :class:`Kube` whose pods really run, plus the node to stop and restart it."""

    node: RealNode | None = None

    @property
    def node_name(self) -> str:
        return NODE_NAME


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """The session's real node, started the first time a ``realnode`` test asks for it."""
    # Both are seconds when current; they rebuild what the working tree changed since (the
    # cortex image after a code change, a component after a version bump), so the pods run
    # this tree's code, not the image of an older one.
    for command in ([str(binaries.SCRIPT), "node"], [str(IMAGES_SCRIPT)]):
        built = subprocess.run(command, capture_output=True, text=True, check=False)
        if built.returncode != 0:
            pytest.fail(f"{' '.join(command)} failed:\n{built.stderr[-4000:]}", pytrace=False)
    bin_dir = binaries.bin_dir()
    node = RealNode(bin_dir=bin_dir, images_dir=images_dir())
    try:
        node.start()
    except RealNodeError as error:
        pytest.fail(f"real node failed to start: {error}", pytrace=False)
    try:
        assert node.plane is not None
        yield RealCluster(kubeconfig=node.kubeconfig, bin_dir=bin_dir, server=node.plane.server,
                          home=tmp_path_factory.mktemp("realnode-clients"),
                          volume_directory=node.plane.volume_directory, node=node)
    finally:
        node.stop()


def repository_root() -> Path:
    return Path(__file__).resolve().parents[2]
