"""A real one-node Kubernetes cluster on this host: pods run in containerd + runc.

Callers: tests/support/realnode.py (the ``real_node`` pytest fixture), realnode_cli.py
(``hack/k8s/realnode.py up|down``, for ``make run`` and developers).

Start, in order, each a bounded wait on a condition that fails early with a log tail: sweep
what a killed run left (nodehost.sweep); the node bridge and forwarding (nodehost.prepare);
the control plane of controlplane.py on the bridge address without kwok; containerd (own
root, state and socket); the images of hack/images/build.sh imported; the kubelet (node
Ready); CoreDNS; kube-proxy; the ``local`` StorageClass and its volumes. Stop: pods'
sandboxes torn down through the CRI (crictl), so CNI removes their veths, namespaces and
chains; every process stopped; then the sweep, which leaves no process, mount, namespace,
veth, bridge or chain of the node. One node per machine: a lock file says who runs it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from . import nodehost, pki, processes, storage
from .api import Api
from .controlplane import ADMIN, ControlPlane
from .layouts import LOOPBACK
from .nodeconfig import (
    COREDNS_READY,
    KUBE_PROXY_HEALTHZ,
    KUBELET_HEALTHZ_PORT,
    NODE_IP,
    NODE_NAME,
    NodeLayout,
    cni_conflist,
    containerd_config,
    coredns_rbac,
    corefile,
    kube_proxy_config,
    kubelet_config,
)
from .nodes import node_is_ready
from .waiting import ControlPlaneError, wait_until

__all__ = ["NODE_BINARIES", "RealNode", "RealNodeError", "default_root"]

START_TIMEOUT_S = 180.0
DRAIN_TIMEOUT_S = 60.0
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns", "crictl")
HOST_COMMANDS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip")
IMAGES = ("pause", "postgres-age", "cortex")
# Imported when hack/images/build.sh exported them (CloudNativePG: after `make node-deps`).
OPTIONAL_IMAGES = ("cnpg", "minio")
KUBELET = pki.ClientIdentity(name="kubelet", user=f"system:node:{NODE_NAME}",
                             groups=("system:nodes",))
KUBE_PROXY = pki.ClientIdentity(name="kube-proxy", user="system:kube-proxy")
COREDNS = pki.ClientIdentity(name="coredns", user="attested-cortex:coredns")
# The API server's client certificate towards kubelets (logs, exec, port-forward).
APISERVER_KUBELET = pki.ClientIdentity(name="apiserver-kubelet-client",
                                       user="kube-apiserver-kubelet-client",
                                       groups=("system:masters",))
KUBELET_SERVING = "kubelet-serving"


class RealNodeError(ControlPlaneError):
    """The real node could not start (or is already running elsewhere)."""


def default_root() -> Path:
    cache = os.environ.get("ATTESTED_CORTEX_CACHE") or str(Path.home() / ".cache/attested-cortex")
    return Path(cache) / "node"


def missing_host_commands() -> list[str]:
    return [c for c in HOST_COMMANDS if shutil.which(c) is None] + [
        f"/usr/lib/cni/{p}" for p in ("bridge", "host-local", "portmap", "loopback")
        if not Path(f"/usr/lib/cni/{p}").is_file()]


def missing_binaries(bin_dir: Path) -> list[str]:
    return [b for b in NODE_BINARIES if not (bin_dir / b).is_file()]


def missing_images(images_dir: Path) -> list[str]:
    return [i for i in IMAGES if not (images_dir / f"{i}.tar").is_file()]


class RealNode:
    """The cluster; use as a context manager or call start()/stop() (both idempotent)."""

    def __init__(self, *, bin_dir: Path, images_dir: Path, root: Path | None = None) -> None:
        self.bin_dir = bin_dir
        self.images_dir = images_dir
        self.layout = NodeLayout(root or default_root())
        self.plane: ControlPlane | None = None
        self._running: list[processes.Component] = []
        self._lock: IO[str] | None = None
        self.timings: dict[str, float] = {}  # seconds per start step, for the CLI and docs

    @property
    def kubeconfig(self) -> Path:
        if self.plane is None:
            raise RealNodeError("the real node is not running")
        return self.plane.kubeconfig

    def start(self) -> None:
        if self.plane is not None:
            return
        self._take_lock()
        try:
            self._check_prerequisites()
            nodehost.sweep(self.layout)
            shutil.rmtree(self.layout.run, ignore_errors=True)
            self.layout.run.mkdir(parents=True)
            nodehost.prepare(self.layout)
            steps: list[tuple[str, Callable[[], None]]] = [
                ("control plane", self._start_plane), ("containerd", self._start_containerd),
                ("images", self._import_images), ("kubelet", self._start_kubelet),
                ("coredns", self._start_coredns), ("kube-proxy", self._start_kube_proxy),
                ("volumes", self._prepare_volumes)]
            self.timings = {}
            for name, step in steps:
                began = time.monotonic()
                step()
                self.timings[name] = round(time.monotonic() - began, 1)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Tear pods down through the CRI, stop every process, then sweep the host."""
        if self._lock is None:
            return
        try:
            kubelet = next((c for c in self._running if c.name == "kubelet"), None)
            if kubelet is not None:
                processes.stop(kubelet)
                self._running.remove(kubelet)
            self._remove_sandboxes()
            while self._running:
                processes.stop(self._running.pop())
            if self.plane is not None:
                self.plane.stop()
                self.plane = None
            self._kube_proxy_cleanup()
            nodehost.sweep(self.layout)
            shutil.rmtree(self.layout.run, ignore_errors=True)
        finally:
            self._release_lock()

    def sweep(self) -> None:
        """Remove what a killed run left; refuses while another process runs the node."""
        self._take_lock()
        try:
            nodehost.sweep(self.layout)
            shutil.rmtree(self.layout.run, ignore_errors=True)
        finally:
            self._release_lock()

    def __enter__(self) -> RealNode:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    # --- pieces ---------------------------------------------------------------------------

    def _take_lock(self) -> None:
        self.layout.root.mkdir(parents=True, exist_ok=True)
        lock = self.layout.lock.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            lock.close()
            raise RealNodeError(f"another real node runs on this machine (lock "
                                f"{self.layout.lock} held)") from error
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock

    def _release_lock(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _check_prerequisites(self) -> None:
        problems = []
        if os.geteuid() != 0:
            problems.append("must run as root (containerd, kubelet, iptables)")
        if missing := missing_host_commands():
            problems.append(f"missing {missing}: run hack/k8s/ensure-node-packages.sh")
        if missing := missing_binaries(self.bin_dir):
            problems.append(f"missing {missing}: run hack/k8s/ensure-binaries.sh node")
        if missing := missing_images(self.images_dir):
            problems.append(f"missing images {missing}: run hack/images/build.sh")
        if problems:
            raise RealNodeError("; ".join(problems))

    def _launch(self, name: str, command: list[str]) -> processes.Component:
        component = processes.start(name, command, log=self.layout.run / "logs" / f"{name}.log")
        self._running.append(component)
        return component

    def _wait(self, condition: Callable[[], bool], *, what: str) -> None:
        wait_until(condition, what=what, timeout_s=START_TIMEOUT_S,
                   watched=[*self._running, *(self.plane._running if self.plane else [])])

    def _pki(self, name: str) -> tuple[Path, Path]:
        assert self.plane is not None
        return self.plane.layout.cert(name), self.plane.layout.key(name)

    def _start_plane(self) -> None:
        plane_layout_root = self.layout.plane
        client_cert, client_key = (plane_layout_root / "pki" / f"{APISERVER_KUBELET.name}.crt",
                                   plane_layout_root / "pki" / f"{APISERVER_KUBELET.name}.key")
        self.plane = ControlPlane(
            bin_dir=self.bin_dir, root=plane_layout_root, address=NODE_IP, fake_node=False,
            identities=(KUBELET, KUBE_PROXY, COREDNS, APISERVER_KUBELET),
            apiserver_args=(f"--kubelet-client-certificate={client_cert}",
                            f"--kubelet-client-key={client_key}",
                            f"--kubelet-certificate-authority={plane_layout_root / 'pki/ca.crt'}",
                            "--kubelet-preferred-address-types=InternalIP"))
        self.plane.start()
        pki.make_serving_cert(self.plane.layout, name=KUBELET_SERVING, subject=f"/CN={NODE_NAME}",
                              ips=(NODE_IP,))
        self.plane.layout.key(KUBELET_SERVING).chmod(0o600)

    def _admin(self) -> Api:
        assert self.plane is not None
        return Api(self.plane.server, self.plane.layout, ADMIN.name)

    def _ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ctr", "--address", str(self.layout.containerd_socket),
                               "--namespace", "k8s.io", *args], capture_output=True, text=True,
                              check=False, timeout=timeout)

    def _start_containerd(self) -> None:
        layout = self.layout
        layout.cni_conf_dir.mkdir(parents=True)
        (layout.cni_conf_dir / "10-attested-cortex.conflist").write_text(
            json.dumps(cni_conflist(layout), indent=2))
        layout.containerd_config.write_text(containerd_config(layout))
        self._launch("containerd", ["containerd", "--config", str(layout.containerd_config)])
        self._wait(lambda: self._ctr("version", timeout=10).returncode == 0,
                   what="containerd answering on its socket")

    def _import_images(self) -> None:
        """Load each export whose stamp changed since it was last imported (warm: nothing)."""
        self.layout.imported.mkdir(parents=True, exist_ok=True)
        optional = [i for i in OPTIONAL_IMAGES if (self.images_dir / f"{i}.tar").is_file()]
        for image in (*IMAGES, *optional):
            stamp = (self.images_dir / f"{image}.sha").read_text()
            done = self.layout.imported / f"{image}.sha"
            ref = (self.images_dir / f"{image}.ref").read_text().strip()
            present = self._ctr("images", "check", f"name=={ref}").stdout.count(ref) > 0
            if present and done.is_file() and done.read_text() == stamp:
                continue
            result = self._ctr("images", "import", "--snapshotter", "overlayfs",
                               str(self.images_dir / f"{image}.tar"))
            if result.returncode != 0:
                raise RealNodeError(f"ctr import of {image} failed: {result.stderr.strip()}")
            done.write_text(stamp)

    def _start_kubelet(self) -> None:
        assert self.plane is not None
        layout = self.layout
        layout.resolv_conf.write_text("")
        for directory in (layout.kubelet_dir, layout.pod_logs, layout.volume_plugins):
            directory.mkdir(parents=True, exist_ok=True)
        cert, key = self._pki(KUBELET_SERVING)
        layout.kubelet_config.write_text(json.dumps(kubelet_config(
            layout, ca=self.plane.layout.cert("ca"), cert=cert, key=key), indent=2))
        kubeconfig = self.plane.layout.kubeconfig(KUBELET.name)
        self._launch("kubelet", [
            str(self.bin_dir / "kubelet"), f"--config={layout.kubelet_config}",
            f"--kubeconfig={kubeconfig}", f"--root-dir={layout.kubelet_dir}",
            f"--cert-dir={layout.kubelet_dir / 'pki'}", f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}", "--v=1"])
        healthz = f"http://{LOOPBACK}:{KUBELET_HEALTHZ_PORT}/healthz"
        self._wait(lambda: _http_ok(healthz), what="kubelet /healthz")
        api = self._admin()
        self._wait(lambda: node_is_ready(api.request(f"/api/v1/nodes/{NODE_NAME}")),
                   what=f"node {NODE_NAME} Ready")

    def _start_coredns(self) -> None:
        assert self.plane is not None
        api = self._admin()
        for path, body in coredns_rbac(COREDNS.user):
            api.request(path, method="POST", body=body)
        self.layout.corefile.write_text(corefile(
            kubeconfig=self.plane.layout.kubeconfig(COREDNS.name)))
        self._launch("coredns", [str(self.bin_dir / "coredns"), "-conf", str(self.layout.corefile)])
        self._wait(lambda: _http_ok(f"http://{COREDNS_READY}/ready"), what="CoreDNS /ready")

    def _start_kube_proxy(self) -> None:
        assert self.plane is not None
        self.layout.kube_proxy_config.write_text(json.dumps(kube_proxy_config(
            kubeconfig=self.plane.layout.kubeconfig(KUBE_PROXY.name)), indent=2))
        self._launch("kube-proxy", [str(self.bin_dir / "kube-proxy"),
                                    f"--config={self.layout.kube_proxy_config}"])
        self._wait(lambda: _http_ok(f"http://{KUBE_PROXY_HEALTHZ}/healthz"),
                   what="kube-proxy /healthz")

    def _prepare_volumes(self) -> None:
        """The control plane made the ``local`` class and its static hostPath volumes
        (storage.py); their directories are made here world-writable, because hostPath gets no
        fsGroup and the pods run as non-root users (postgres 999, cortex 65532)."""
        assert self.plane is not None
        for volume in storage.initial_volumes(self.plane.volume_directory):
            spec = volume["spec"]
            assert isinstance(spec, dict)
            directory = Path(spec["hostPath"]["path"])
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(0o777)

    def _remove_sandboxes(self) -> None:
        """Stop and remove every pod sandbox through the CRI: CNI DEL frees IPs, veths and
        namespaces. Needs containerd alive; without it the sweep cleans up."""
        if not self.layout.containerd_socket.exists():
            return
        crictl = [str(self.bin_dir / "crictl"), "--timeout=30s",
                  f"--runtime-endpoint=unix://{self.layout.containerd_socket}",
                  f"--image-endpoint=unix://{self.layout.containerd_socket}"]
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            pods = subprocess.run([*crictl, "pods", "-q"], capture_output=True, text=True,
                                  check=False, timeout=DRAIN_TIMEOUT_S).stdout.split()
            for pod in pods:
                subprocess.run([*crictl, "stopp", pod], capture_output=True, check=False,
                               timeout=DRAIN_TIMEOUT_S)
                subprocess.run([*crictl, "rmp", "--force", pod], capture_output=True,
                               check=False, timeout=DRAIN_TIMEOUT_S)

    def _kube_proxy_cleanup(self) -> None:
        kube_proxy = self.bin_dir / "kube-proxy"
        if kube_proxy.is_file():
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run([str(kube_proxy), "--cleanup"], capture_output=True,
                               check=False, timeout=60)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - our loopback
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False
