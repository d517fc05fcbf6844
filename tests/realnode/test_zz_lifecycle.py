"""Stop leaves nothing behind and start works again (runs last in this package: it restarts
the session's node, so later tests get a fresh cluster).

While it runs, every socket the node's processes listen on is on 127.0.0.1 or the node's
address. With a pod running that has a veth, a network namespace, an emptyDir mount and a
host port (portmap chains), ``stop`` must leave no process, mount, network namespace, veth,
bridge or iptables chain of the node; a second ``stop`` is a no-op; ``start`` brings a Ready
node back and a second ``start`` is a no-op.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
from hack.k8s.localkube import nodehost
from hack.k8s.localkube.nodeconfig import NODE_IP

from tests.realnode import manifests
from tests.support.realnode import RealCluster

pytestmark = [pytest.mark.realnode, pytest.mark.slow]


def _sleeper(namespace: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper",
                                                             "namespace": namespace},
            "spec": {"containers": [{
                "name": "sleep", "image": manifests.CORTEX_IMAGE, "imagePullPolicy": "Never",
                "command": ["python", "-c", "import time; time.sleep(3600)"],
                "ports": [{"containerPort": 9000, "hostPort": 39000, "hostIP": "10.244.0.1"}],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                "volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}],
                "terminationGracePeriodSeconds": 1}}


def _listening_addresses(pids: set[int]) -> set[str]:
    """Local addresses of the TCP/UDP sockets that processes in ``pids`` listen on."""
    out = subprocess.run(["ss", "-H", "-ltnup"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    found = set()
    for line in out.splitlines():
        owners = {int(pid) for pid in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            found.add(line.split()[4].rsplit(":", 1)[0])
    return found


def test_stop_leaves_nothing_and_start_comes_back(real_node: RealCluster) -> None:
    node = real_node.node
    assert node is not None
    ns = f"l-{uuid.uuid4().hex[:8]}"
    real_node.kubectl("apply", "-f", "-", input=manifests.as_input(
        [manifests.namespace(ns, restricted=False), _sleeper(ns)]))
    real_node.kubectl("wait", "-n", ns, "pod/sleeper", "--for=condition=Ready", "--timeout=120s")
    netns_before = set(json.loads(node.layout.state_file.read_text())["netns"])

    running = nodehost.leftovers(node.layout, netns_before)
    assert running.processes and running.mounts and running.netns and running.veths
    assert running.bridge and running.chains  # the check sees what a running node has
    addresses = _listening_addresses(set(running.processes))
    assert addresses, "found no listening socket of the node's processes"
    assert addresses <= {"127.0.0.1", NODE_IP}, addresses

    node.stop()
    left = nodehost.leftovers(node.layout, netns_before)
    assert left.empty(), left
    node.stop()  # idempotent

    node.start()
    node.start()  # idempotent
    ready = real_node.kubectl("get", "node", real_node.node_name, "-o",
                              "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
    assert ready.stdout == "True"
