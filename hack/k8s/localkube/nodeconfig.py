"""Files and API objects of the real one-node cluster: pure functions of its layout.

Callers: realnode.py (writes these before starting containerd, the kubelet, kube-proxy and
CoreDNS, and creates the API objects once the API server answers). Nothing here touches the
file system or the network.

Addresses: the node is the bridge ``acbr0`` with ``NODE_IP`` (the pods' gateway). The API
server, the kubelet's API and CoreDNS listen there, so pods reach them; everything else
listens on 127.0.0.1. Pods get no default route: they reach the pod and service ranges
only, never an address outside this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .components import POD_CIDR, SERVICE_CIDR
from .kubeconfigs import CLUSTER
from .layouts import LOOPBACK

NODE_NAME = "attested-cortex-node"
BRIDGE = "acbr0"
NODE_IP = "10.244.0.1"
NODE_SUBNET = "10.244.0.0/24"
CNI_NETWORK = "attested-cortex"
PAUSE_IMAGE = "localhost/attested-cortex/pause:3.10"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ = f"{LOOPBACK}:10256"
KUBE_PROXY_METRICS = f"{LOOPBACK}:10249"
COREDNS_READY = f"{LOOPBACK}:8181"


@dataclass(frozen=True)
class NodeLayout:
    """The real node's directories: ``persistent`` survives stops (the image store), ``run``
    is one run's state and is removed by stop."""

    root: Path

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def containerd_root(self) -> Path:  # images and snapshots: kept, so a warm start is quick
        return self.root / "containerd"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def state_file(self) -> Path:  # the host settings found before start, restored by stop
        return self.root / "host-state.json"

    @property
    def plane(self) -> Path:
        return self.run / "plane"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.run / "containerd.toml"

    @property
    def runc_root(self) -> Path:
        return self.run / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.run / "cni" / "net.d"

    @property
    def ipam_dir(self) -> Path:
        return self.run / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.run / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.run / "kubelet.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.run / "kube-proxy.yaml"

    @property
    def corefile(self) -> Path:
        return self.run / "Corefile"

    @property
    def resolv_conf(self) -> Path:
        return self.run / "resolv.conf"

    @property
    def pod_logs(self) -> Path:
        return self.run / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.run / "volume-plugins"

    @property
    def imported(self) -> Path:  # stamps of the image exports loaded into containerd_root
        return self.containerd_root / "imported"


def _toml_str(value: str | Path) -> str:
    return json.dumps(str(value))


def containerd_config(layout: NodeLayout) -> str:
    """containerd 1.6 with its CRI plugin, private root/state/socket, runc with a private root.

    restrict_oom_score_adj: sandboxes may not lower their OOM score on this machine (without
    it every sandbox fails with "can't get final child's PID from pipe").
    """
    cri = '[plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        f"root = {_toml_str(layout.containerd_root / 'root')}",
        f"state = {_toml_str(layout.containerd_state)}",
        "[grpc]",
        f"  address = {_toml_str(layout.containerd_socket)}",
        "[ttrpc]",
        f"  address = {_toml_str(str(layout.containerd_socket) + '.ttrpc')}",
        "[debug]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        f"{cri}]",
        f"  sandbox_image = {_toml_str(PAUSE_IMAGE)}",
        "  restrict_oom_score_adj = true",
        f"  stream_server_address = {_toml_str(LOOPBACK)}",
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        f"{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"  Root = {_toml_str(layout.runc_root)}",
        f"{cri}.cni]",
        '  bin_dir = "/usr/lib/cni"',
        f"  conf_dir = {_toml_str(layout.cni_conf_dir)}",
        "  max_conf_num = 1",
        "",
    ])


def cni_conflist(layout: NodeLayout) -> dict[str, object]:
    """bridge + host-local + portmap (containerd adds loopback itself). No default route and
    no masquerade: pods reach the node, other pods and services, nothing beyond."""
    return {
        "cniVersion": "0.4.0",
        "name": CNI_NETWORK,
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(layout.ipam_dir),
                      "ranges": [[{"subnet": NODE_SUBNET, "gateway": NODE_IP}]],
                      "routes": [{"dst": SERVICE_CIDR}, {"dst": POD_CIDR}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}, "snat": False},
        ],
    }


def kubelet_config(layout: NodeLayout, *, ca: Path, cert: Path, key: Path) -> dict[str, object]:
    """cgroupfs driver on cgroup v1, no swap check; the API on the node address only."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca)}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "clusterDNS": [NODE_IP],
        "clusterDomain": "cluster.local",
        "resolvConf": str(layout.resolv_conf),
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.volume_plugins),
        "maxPods": 60,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%",
                         "imagefs.available": "2%"},
        "registerNode": True,
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(*, kubeconfig: Path) -> dict[str, object]:
    """iptables mode; conntrack sysctls left alone (zeros); NodePorts on the node address."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "bindAddress": LOOPBACK,
        "healthzBindAddress": KUBE_PROXY_HEALTHZ,
        "metricsBindAddress": KUBE_PROXY_METRICS,
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": NODE_NAME,
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "iptables": {"localhostNodePorts": False},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
    }


def corefile(*, kubeconfig: Path) -> str:
    """cluster.local from the API server, on the node address; no forwarding anywhere else."""
    return "\n".join([
        ".:53 {",
        f"    bind {NODE_IP}",
        "    errors",
        f"    ready {COREDNS_READY}",
        "    kubernetes cluster.local in-addr.arpa ip6.arpa {",
        f"        kubeconfig {kubeconfig} {CLUSTER}",
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "    }",
        "    cache 30",
        "    loadbalance",
        "}",
        "",
    ])


def coredns_rbac(user: str) -> list[tuple[str, dict[str, object]]]:
    """(API path, object) pairs: read access to what the kubernetes plugin watches."""
    name = "attested-cortex:coredns"
    role: dict[str, object] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
             "verbs": ["list", "watch"]},
        ],
    }
    binding: dict[str, object] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    return [(f"{rbac}/clusterroles", role), (f"{rbac}/clusterrolebindings", binding)]
