"""Where a control plane keeps its files, and which loopback ports it listens on.

Callers: controlplane.py (creates one per start), components.py and kubeconfigs.py (read paths).
Pure values: nothing here touches the file system except ``free_port``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago (the component binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Ports:
    """The loopback ports of one control plane."""

    etcd_client: int
    etcd_peer: int
    apiserver: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(etcd_client=free_port(), etcd_peer=free_port(), apiserver=free_port())


@dataclass(frozen=True)
class Layout:
    """The directory tree of one control plane: certificates, kubeconfigs, data and logs."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def kubeconfig(self, user: str) -> Path:
        return self.root / f"{user}.kubeconfig"

    def cert(self, name: str) -> Path:
        return self.pki / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.pki / f"{name}.key"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"
