"""What ``make run`` builds for the example it runs, and nothing more (issue 43, ADR 0119).

A cold build of everything the real node can run took 48 min, and the default example needs
neither CloudNativePG (259 s) nor MinIO (411 s) nor kwok (246 s, the simulated node's). So the
build is read from the MemoryCortex the run applies: every example needs the control plane, the
node and the images; a ``cloudNativePG`` database adds CloudNativePG's manager; an object store
(any ``objectStore``: a backup, a recovery, a restore) adds MinIO. Each group is a call of the
version-keyed, idempotent build scripts (hack/k8s/ensure-binaries.sh, hack/images/build.sh), so
a group built once, by any target, is seconds afterwards. Pure: hack/run.py runs the groups,
tests/infra/test_runplan.py checks the choice with literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BINARIES = "hack/k8s/ensure-binaries.sh"
IMAGES = "hack/images/build.sh"


@dataclass(frozen=True)
class Group:
    """One build step of ``make run``: its name (the key of its remembered time), what it is
    for (said before it runs) and the command, relative to the repository root."""

    name: str
    purpose: str
    command: tuple[str, ...]
    #: Its cold build on the reference machine (2 cores, issue 43), said before a first build.
    cold_s: int

    @property
    def components(self) -> tuple[str, ...]:
        """The ensure-binaries.sh components (or group names) it builds; none for images."""
        return self.command[1:] if self.command[0] == BINARIES else ()


CONTROL_PLANE = Group(
    "control plane", "etcd, kube-apiserver, controller manager and scheduler the node joins; "
    "kubectl and helm, which install the chart", (BINARIES, "control-plane"), 1260 - 246)
NODE = Group("node", "kubelet, kube-proxy, CoreDNS and crictl: the node that runs the pods",
             (BINARIES, "node-base"), 1090 - 259 - 411)
CLOUDNATIVEPG = Group("CloudNativePG", "the operator of a cloudNativePG database (the HA "
                      "cortex's 3 instances)", (BINARIES, "cnpg"), 259)
OBJECT_STORE = Group("object store (MinIO)", "the S3-compatible store the example's backups "
                     "go to", (BINARIES, "minio"), 411)
IMAGES_GROUP = Group("images", "pause, PostgreSQL + AGE and the cortex (and CloudNativePG's and "
                     "MinIO's around their binaries, once built), for the node's containerd",
                     (IMAGES,), 232)


def _section(parent: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    value = parent.get(key) if parent is not None else None
    return value if isinstance(value, Mapping) else None


def _names_an_object_store(value: Any) -> bool:
    """Any ``objectStore`` section (a physical or logical backup, a recovery, a restore)."""
    if isinstance(value, Mapping):
        return any(key == "objectStore" or _names_an_object_store(child)
                   for key, child in value.items())
    return isinstance(value, list) and any(_names_an_object_store(child) for child in value)


def groups_for(memorycortex: Mapping[str, Any]) -> tuple[Group, ...]:
    """The build groups a MemoryCortex manifest needs, in build order: the images last, since
    build.sh wraps the CloudNativePG and MinIO binaries built before it."""
    spec = _section(memorycortex, "spec")
    wanted = [CONTROL_PLANE, NODE]
    if _section(_section(spec, "database"), "cloudNativePG") is not None:
        wanted.append(CLOUDNATIVEPG)
    if _names_an_object_store(spec):
        wanted.append(OBJECT_STORE)
    return (*wanted, IMAGES_GROUP)
