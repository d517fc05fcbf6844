"""The real node's configuration files, checked without running anything (always runs):
every listening address is loopback or the node's bridge address, pods get no route out of
the cluster's ranges, and the settings this machine needs are there."""

from __future__ import annotations

import ipaddress
import re
import tomllib
from pathlib import Path

from hack.k8s.localkube import nodeconfig
from hack.k8s.localkube.nodeconfig import NODE_IP, NodeLayout

LAYOUT = NodeLayout(Path("/cache/node"))
ALLOWED = {"127.0.0.1", NODE_IP}


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0] if ":" in address else address


def test_containerd_is_private_and_restricts_oom_score_adj() -> None:
    config = tomllib.loads(nodeconfig.containerd_config(LAYOUT))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == nodeconfig.PAUSE_IMAGE
    assert _host(cri["stream_server_address"]) in ALLOWED
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["SystemdCgroup"] is False
    for path in (config["root"], config["state"], config["grpc"]["address"], runc["Root"]):
        assert path.startswith("/cache/node/"), path  # never the system containerd's dirs
    assert config["debug"]["address"] == "" and config["metrics"]["address"] == ""


def test_kubelet_listens_on_the_node_and_loopback_only() -> None:
    config = nodeconfig.kubelet_config(LAYOUT, ca=Path("ca"), cert=Path("c"), key=Path("k"))
    assert config["address"] == NODE_IP and config["healthzBindAddress"] == "127.0.0.1"
    assert config["readOnlyPort"] == 0
    assert config["authentication"] == {"anonymous": {"enabled": False},
                                        "webhook": {"enabled": True},
                                        "x509": {"clientCAFile": "ca"}}
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["failCgroupV1"] is False and config["failSwapOn"] is False


def test_kube_proxy_uses_iptables_and_binds_nowhere_else() -> None:
    config = nodeconfig.kube_proxy_config(kubeconfig=Path("k"))
    assert config["mode"] == "iptables"
    for key in ("bindAddress", "healthzBindAddress", "metricsBindAddress"):
        assert _host(str(config[key])) in ALLOWED
    assert config["nodePortAddresses"] == [f"{NODE_IP}/32"]


def test_coredns_binds_the_node_and_forwards_nowhere() -> None:
    corefile = nodeconfig.corefile(kubeconfig=Path("k"))
    assert re.findall(r"^\s*bind (\S+)$", corefile, re.M) == [NODE_IP]
    assert "forward" not in corefile
    assert _host(nodeconfig.COREDNS_READY) in ALLOWED


def test_pods_have_no_route_out_of_the_cluster_ranges() -> None:
    bridge = nodeconfig.cni_conflist(LAYOUT)["plugins"][0]  # type: ignore[index]
    assert bridge["ipMasq"] is False
    routes = [ipaddress.ip_network(r["dst"]) for r in bridge["ipam"]["routes"]]
    assert ipaddress.ip_network("0.0.0.0/0") not in routes
    assert all(route.is_private for route in routes)
