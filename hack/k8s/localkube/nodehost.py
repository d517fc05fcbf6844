"""What the real node changes on the host, and the sweep that undoes all of it.

Callers: realnode.py (``prepare`` before start, ``sweep`` at stop and before a start, so a
crashed run is cleaned up too), tests/realnode (``leftovers``, the proof that stop left
nothing). Everything touched is named by the node: processes whose command line names its
directory, mounts under it, the network namespaces created after ``prepare`` recorded the
existing ones, veths on its bridge, the bridge, KUBE-* iptables chains and the CNI chains of
its network. Sysctls found at ``prepare`` are restored.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .nodeconfig import BRIDGE, CNI_NETWORK, NODE_IP, NodeLayout

NETNS_DIR = Path("/run/netns")
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables")
CGROUP_ROOT = Path("/sys/fs/cgroup")
_KILL_WAIT_S = 10.0
_TABLES = ("filter", "nat", "mangle")


class HostError(Exception):
    """A host command failed; the message carries its output."""


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    if check and result.returncode != 0:
        raise HostError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name


def netns_names() -> set[str]:
    return {p.name for p in NETNS_DIR.iterdir()} if NETNS_DIR.is_dir() else set()


def prepare(layout: NodeLayout) -> None:
    """Record the host settings, then: the node bridge with NODE_IP, forwarding on."""
    if not layout.state_file.exists():
        state = {"sysctls": {name: _sysctl_path(name).read_text().strip() for name in SYSCTLS
                             if _sysctl_path(name).exists()},
                 "netns": sorted(netns_names())}
        layout.state_file.write_text(json.dumps(state))
    if not Path(f"/sys/class/net/{BRIDGE}").exists():
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    addresses = _run("ip", "-o", "-4", "addr", "show", "dev", BRIDGE).stdout
    if f" {NODE_IP}/" not in addresses:
        _run("ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    for name in SYSCTLS:  # forwarding for service traffic; br_netfilter for hairpin replies
        if _sysctl_path(name).exists():
            _sysctl_path(name).write_text("1\n")


# --- the sweep --------------------------------------------------------------------------------

def node_processes(layout: NodeLayout) -> list[int]:
    """Processes whose command line names the node's directory (ours, shims, components)."""
    needle = str(layout.root).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _kill(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + _KILL_WAIT_S
        while time.monotonic() < deadline:
            alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()
                     and "Z" not in _state(pid)]
            if not alive:
                return
            time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _runc_containers(layout: NodeLayout) -> None:
    """Containers left in the node's runc root (a killed run): force-deleted, processes too."""
    if not layout.runc_root.is_dir():
        return
    for namespace_root in [layout.runc_root, *layout.runc_root.iterdir()]:
        if not namespace_root.is_dir():
            continue
        listing = _run("runc", "--root", str(namespace_root), "list", "-q", check=False)
        for container in listing.stdout.split():
            _run("runc", "--root", str(namespace_root), "delete", "--force", container,
                 check=False)


def node_mounts(layout: NodeLayout, netns_before: set[str]) -> list[str]:
    """Mount points under the node's directory, and the network namespaces it created."""
    roots = (str(layout.root) + "/",)
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(roots) or (point.startswith(f"{NETNS_DIR}/")
                                       and Path(point).name not in netns_before):
            found.append(point)
    return found


def _unmount_all(layout: NodeLayout, netns_before: set[str]) -> None:
    for _ in range(5):  # stacked mounts come off one layer per pass
        points = node_mounts(layout, netns_before)
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            _run("umount", "-l", point, check=False)


def _remove_netns(netns_before: set[str]) -> None:
    for name in netns_names() - netns_before:
        if name.startswith("cni-"):
            with contextlib.suppress(OSError):
                (NETNS_DIR / name).unlink()


def node_veths() -> list[str]:
    """Host ends of veths attached to the node bridge."""
    out = _run("ip", "-o", "link", "show", "master", BRIDGE, check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def _remove_links() -> None:
    for veth in node_veths():
        _run("ip", "link", "delete", veth, check=False)
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        _run("ip", "link", "delete", BRIDGE, check=False)


_CHAIN = re.compile(r"^:(\S+) ")


def _ours(chain: str, rules: list[str]) -> bool:
    if chain.startswith("KUBE-"):
        return True
    if chain.startswith("CNI-HOSTPORT-"):  # shared portmap chains: ours once they are empty
        return all(f'"{CNI_NETWORK}"' in rule or "-j CNI-" in rule for rule in rules)
    return chain.startswith("CNI-") and any(f'"{CNI_NETWORK}"' in r for r in rules)


def node_chains(binary: str = "iptables") -> dict[str, list[str]]:
    """table -> the chains of that table the node's components created."""
    found: dict[str, list[str]] = {}
    for table in _TABLES:
        dump = _run(f"{binary}-save", "-t", table, check=False).stdout.splitlines()
        chains = [m.group(1) for line in dump if (m := _CHAIN.match(line))]
        ours = [c for c in chains
                if _ours(c, [line for line in dump if line.startswith(f"-A {c} ")])]
        if ours:
            found[table] = ours
    return found


def _jump_target(tokens: list[str]) -> str | None:
    for flag in ("-j", "-g"):
        if flag in tokens[:-1]:
            return tokens[tokens.index(flag) + 1]
    return None


def _remove_chains() -> None:
    for binary in ("iptables", "ip6tables"):
        if _run("sh", "-c", f"command -v {binary}-save", check=False).returncode != 0:
            continue
        for table, chains in node_chains(binary).items():
            dump = _run(f"{binary}-save", "-t", table, check=False).stdout.splitlines()
            for line in dump:  # jumps into our chains from the chains that stay
                tokens = shlex.split(line)
                if (line.startswith("-A ") and tokens[1] not in chains
                        and _jump_target(tokens) in chains):
                    _run(binary, "-w", "-t", table, "-D", *tokens[1:], check=False)
            for chain in chains:
                _run(binary, "-w", "-t", table, "-F", chain, check=False)
            for chain in chains:
                _run(binary, "-w", "-t", table, "-X", chain, check=False)


def _remove_cgroups() -> None:
    """The kubelet's kubepods hierarchy in every cgroup v1 controller (empty once no pod runs)."""
    if not CGROUP_ROOT.is_dir():
        return
    for controller in CGROUP_ROOT.iterdir():
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()),
                                key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


# Directories containerd's shims and libcni create outside the node's root; removed when
# empty (a system containerd or another CNI user keeps files in them, so they stay).
_SHARED_DIRS = (Path("/run/containerd/s"), Path("/run/containerd"),
                Path("/var/lib/cni/results"), Path("/var/lib/cni"))


def _remove_empty_shared_dirs() -> None:
    for directory in _SHARED_DIRS:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _recorded_netns(layout: NodeLayout) -> set[str]:
    """The namespaces that existed before the node started; without a record, all current
    ones (a namespace we cannot prove is ours is never removed)."""
    try:
        return set(json.loads(layout.state_file.read_text()).get("netns", []))
    except (OSError, ValueError):
        return netns_names()


def _restore_sysctls(layout: NodeLayout) -> None:
    try:
        sysctls = json.loads(layout.state_file.read_text()).get("sysctls", {})
    except (OSError, ValueError):
        return
    for name, value in sysctls.items():
        with contextlib.suppress(OSError):
            _sysctl_path(name).write_text(f"{value}\n")


def sweep(layout: NodeLayout) -> None:
    """Remove everything a (possibly killed) run left: idempotent, safe when nothing runs."""
    _runc_containers(layout)
    _kill(node_processes(layout))
    netns_before = _recorded_netns(layout)
    _unmount_all(layout, netns_before)
    _remove_netns(netns_before)
    _remove_links()
    _remove_chains()
    _remove_cgroups()
    _remove_empty_shared_dirs()
    _restore_sysctls(layout)
    layout.state_file.unlink(missing_ok=True)


@dataclass(frozen=True)
class Leftovers:
    """What the node left on the host; empty after a clean stop."""

    processes: list[int]
    mounts: list[str]
    netns: list[str]
    veths: list[str]
    bridge: bool
    chains: dict[str, list[str]]

    def empty(self) -> bool:
        return not (self.processes or self.mounts or self.netns or self.veths or self.bridge
                    or self.chains)


def leftovers(layout: NodeLayout, netns_before: set[str]) -> Leftovers:
    return Leftovers(
        processes=node_processes(layout),
        mounts=node_mounts(layout, netns_before),
        netns=sorted(n for n in netns_names() - netns_before if n.startswith("cni-")),
        veths=node_veths(),
        bridge=Path(f"/sys/class/net/{BRIDGE}").exists(),
        chains={**node_chains("iptables"),
                **{f"ip6:{t}": c for t, c in node_chains("ip6tables").items()}},
    )
