"""Command lines of the control-plane components: pure functions of the layout and ports.

Callers: controlplane.py. Everything listens on loopback only; etcd speaks plain HTTP on
loopback (only the API server talks to it); controller-manager and scheduler serve no ports.
"""

from __future__ import annotations

from pathlib import Path

from .layouts import LOOPBACK, Layout, Ports
from .pki import APISERVER, CA, SERVICE_ACCOUNT

SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"


def etcd_command(bin_dir: Path, layout: Layout, ports: Ports) -> list[str]:
    client = f"http://{LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [str(bin_dir / "etcd"), "--name=local", f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}", "--unsafe-no-fsync", "--log-level=warn"]


def apiserver_command(bin_dir: Path, layout: Layout, ports: Ports, *,
                      address: str = LOOPBACK) -> list[str]:
    """``address``: loopback, or the real node's bridge address so pods reach the API too."""
    return [str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{ports.etcd_client}",
            f"--bind-address={address}", f"--advertise-address={address}",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={layout.cert(APISERVER)}",
            f"--tls-private-key-file={layout.key(APISERVER)}",
            f"--client-ca-file={layout.cert(CA)}", "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={layout.pki / 'service-account.pub'}",
            f"--service-account-signing-key-file={layout.key(SERVICE_ACCOUNT)}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false"]


def controller_manager_command(bin_dir: Path, layout: Layout) -> list[str]:
    return [str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={layout.kubeconfig('kube-controller-manager')}",
            f"--bind-address={LOOPBACK}", "--secure-port=0", "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={layout.key(SERVICE_ACCOUNT)}",
            f"--root-ca-file={layout.cert(CA)}",
            f"--cluster-signing-cert-file={layout.cert(CA)}",
            f"--cluster-signing-key-file={layout.key(CA)}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false"]


def scheduler_command(bin_dir: Path, layout: Layout) -> list[str]:
    return [str(bin_dir / "kube-scheduler"),
            f"--kubeconfig={layout.kubeconfig('kube-scheduler')}",
            f"--bind-address={LOOPBACK}", "--secure-port=0", "--leader-elect=false",
            "--profiling=false"]


def kwok_command(bin_dir: Path, layout: Layout) -> list[str]:
    """kwok with kwok.yaml: node lease on, pods Running, Job pods Succeeded (or Failed)."""
    return [str(bin_dir / "kwok"), f"--kubeconfig={layout.kubeconfig('kwok')}",
            f"--config={layout.root / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--cidr={POD_CIDR}", f"--node-ip={LOOPBACK}", "--server-address="]
