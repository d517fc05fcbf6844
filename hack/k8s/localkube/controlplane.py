"""Starts and stops the whole local control plane in dependency order.

Callers: tests/support/kube.py (session fixture) and cli.py (``controlplane.py up``).
Order: certificates -> etcd -> kube-apiserver -> storage (default StorageClass, static
volumes) -> controller-manager, scheduler, kwok -> the fake node; ready once the node is
Ready and the ``default`` service account exists (pods are admitted from then on). Stop is
the reverse and removes a directory it created.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from . import components, kubeconfigs, nodes, pki, processes, storage
from .api import Api, ApiUnavailableError
from .layouts import LOOPBACK, Layout, Ports
from .waiting import ControlPlaneError, wait_until

__all__ = ["ControlPlane", "ControlPlaneError"]

START_TIMEOUT_S = 120.0
ADMIN = pki.ClientIdentity(name="admin", user="kubernetes-admin", groups=("system:masters",))
IDENTITIES = (
    ADMIN,
    pki.ClientIdentity(name="kube-controller-manager", user="system:kube-controller-manager"),
    pki.ClientIdentity(name="kube-scheduler", user="system:kube-scheduler"),
    pki.ClientIdentity(name="kwok", user="kwok", groups=("system:masters",)),
)
# Node lease on, pod stages for Jobs that succeed or fail: see kwok.yaml.
KWOK_CONFIG = Path(__file__).with_name("kwok.yaml")


def _etcd_healthy(answer: object) -> bool:
    return isinstance(answer, dict) and answer.get("health") == "true"


class ControlPlane:
    """One running control plane; use as a context manager or call start()/stop().

    The defaults make the kwok cluster of the tests. realnode.py passes ``address`` (the node
    bridge's address, where pods reach the API server), ``fake_node=False`` (its kubelet
    registers the node), its extra client identities and the kubelet-client flags.
    """

    def __init__(self, *, bin_dir: Path, root: Path | None = None, address: str = LOOPBACK,
                 fake_node: bool = True, identities: tuple[pki.ClientIdentity, ...] = (),
                 apiserver_args: tuple[str, ...] = ()) -> None:
        self.bin_dir = bin_dir
        self._owns_root = root is None
        self.layout = Layout(Path(tempfile.mkdtemp(prefix="localkube-")) if root is None else root)
        self.ports = Ports.pick()
        self.address = address
        self.server = f"https://{address}:{self.ports.apiserver}"
        self._fake_node = fake_node
        self._identities = IDENTITIES + identities
        self._apiserver_args = apiserver_args
        self._running: list[processes.Component] = []

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig(ADMIN.name)

    @property
    def volume_directory(self) -> Path:
        """Where the static PersistentVolumes' hostPath directories live."""
        return self.layout.root / "volumes"

    def start(self) -> None:
        try:
            self._prepare_files()
            self._start_etcd()
            self._start_apiserver()
            self._create_storage()
            self._start_controllers()
            self._await_workloads_admitted()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        while self._running:
            processes.stop(self._running.pop())
        if self._owns_root:
            shutil.rmtree(self.layout.root, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def _launch(self, name: str, command: list[str]) -> None:
        missing = Path(command[0])
        if not missing.is_file():
            raise ControlPlaneError(f"{missing} is missing; run hack/k8s/ensure-binaries.sh")
        self._running.append(processes.start(name, command, log=self.layout.log(name)))

    def _wait(self, condition: Callable[[], bool], *, what: str) -> None:
        wait_until(condition, what=what, timeout_s=START_TIMEOUT_S, watched=self._running)

    def _prepare_files(self) -> None:
        self.layout.root.mkdir(parents=True, exist_ok=True)
        self.layout.logs.mkdir(exist_ok=True)
        pki.make_all(self.layout, self._identities, ips=(self.address,))
        for identity in self._identities:
            kubeconfigs.write_kubeconfig(self.layout, server=self.server, user=identity.name)
        shutil.copyfile(KWOK_CONFIG, self.layout.root / "kwok.yaml")

    def _start_etcd(self) -> None:
        self._launch("etcd", components.etcd_command(self.bin_dir, self.layout, self.ports))
        health = Api(f"http://{LOOPBACK}:{self.ports.etcd_client}", self.layout, ADMIN.name)
        self._wait(lambda: _etcd_healthy(health.request("/health")), what="etcd health")

    def _start_apiserver(self) -> None:
        command = [*components.apiserver_command(self.bin_dir, self.layout, self.ports,
                                                 address=self.address), *self._apiserver_args]
        self._launch("kube-apiserver", command)
        api = self._admin_api()
        self._wait(lambda: api.request("/readyz") == "ok", what="kube-apiserver /readyz")

    def _create_storage(self) -> None:
        api = self._admin_api()
        objects = [("/apis/storage.k8s.io/v1/storageclasses", storage.storage_class())]
        objects += [("/api/v1/persistentvolumes", volume)
                    for volume in storage.initial_volumes(self.volume_directory)]
        for path, body in objects:
            try:
                api.request(path, method="POST", body=body)
            except ApiUnavailableError as error:
                raise ControlPlaneError(f"could not create storage: {error}") from error

    def _start_controllers(self) -> None:
        self._launch("kube-controller-manager",
                     components.controller_manager_command(self.bin_dir, self.layout))
        self._launch("kube-scheduler", components.scheduler_command(self.bin_dir, self.layout))
        if self._fake_node:
            self._launch("kwok", components.kwok_command(self.bin_dir, self.layout))

    def _await_workloads_admitted(self) -> None:
        api = self._admin_api()
        sa_path = "/api/v1/namespaces/default/serviceaccounts/default"
        if not self._fake_node:
            self._wait(lambda: api.request(sa_path) is not None, what="default service account")
            return
        try:
            api.request("/api/v1/nodes", method="POST", body=nodes.build_fake_node())
        except ApiUnavailableError as error:
            raise ControlPlaneError(f"could not create the kwok node: {error}") from error
        node_path = f"/api/v1/nodes/{nodes.NODE_NAME}"
        self._wait(lambda: nodes.node_is_ready(api.request(node_path)), what="kwok node Ready")
        self._wait(lambda: api.request(sa_path) is not None, what="default service account")

    def _admin_api(self) -> Api:
        return Api(self.server, self.layout, ADMIN.name)
