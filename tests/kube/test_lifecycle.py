"""Starting and stopping leaves nothing behind; missing binaries fail loudly, never skip.

Covers hack/k8s/controlplane.py (the ``up`` command), the ControlPlane class, the
ensure-binaries.sh script's guards, and the ``kube`` fixture's missing-binary failure.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import pytest
from hack.k8s.localkube import ControlPlane, ControlPlaneError, binaries

from tests.support import kube as kube_plugin

pytestmark = pytest.mark.spawns  # the control plane's scripts as processes

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "k8s" / "ensure-binaries.sh"
UP_TIMEOUT_S = 180.0


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains ``text`` (every component names its directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(
                    errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def _accepts(server: str) -> bool:
    address = urlsplit(server)
    try:
        with socket.create_connection((address.hostname, address.port), timeout=1):
            return True
    except OSError:
        return False


def _pump(stream: IO[str], into: queue.Queue[str | None]) -> None:
    """Copy lines to a queue, then None at end of file (a thread: select() on the pipe would
    miss lines the text wrapper already buffered)."""
    for line in stream:
        into.put(line)
    into.put(None)


def _read_until(lines: queue.Queue[str | None], marker: str) -> list[str]:
    """Lines up to the one starting with ``marker``, waiting at most UP_TIMEOUT_S."""
    seen: list[str] = []
    deadline = time.monotonic() + UP_TIMEOUT_S
    while not any(line.startswith(marker) for line in seen):
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {marker!r} within {UP_TIMEOUT_S}s in {seen}") from None
        assert line is not None, f"exited before printing {marker!r}: {seen}"
        seen.append(line)
    return seen


@pytest.mark.kube
@pytest.mark.slow
def test_the_up_command_serves_until_interrupted_then_leaves_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "plane"
    command = [sys.executable, str(ROOT / "hack" / "k8s" / "controlplane.py"), "up",
               "--dir", str(directory)]
    output: queue.Queue[str | None] = queue.Queue()
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as up:
        assert up.stdout is not None
        reader = threading.Thread(target=_pump, args=(up.stdout, output), daemon=True)
        reader.start()
        try:
            lines = _read_until(output, "Ctrl-C")
        finally:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                # SIGINT ignored (a shell's background job inherits that): fail, don't hang
                up.terminate()
                up.wait(timeout=60)
                raise
            reader.join(timeout=60)
    printed = dict(line.strip().split(": ", 1) for line in lines if ": " in line)
    assert printed["kubeconfig"] == str(directory / "admin.kubeconfig")
    assert up.returncode == 0
    assert _processes_mentioning(str(directory)) == []
    assert not _accepts(printed["server"])
    assert (directory / "logs" / "kube-apiserver.log").is_file()


@pytest.mark.kube
@pytest.mark.slow
def test_the_class_removes_its_temporary_directory_and_processes() -> None:
    with ControlPlane(bin_dir=binaries.bin_dir()) as plane:
        root, server = plane.layout.root, plane.server
        assert _accepts(server)
        assert len(_processes_mentioning(str(root))) >= 5
    assert not root.exists()
    assert _processes_mentioning(str(root)) == []
    assert not _accepts(server)


def test_a_missing_binary_stops_the_start_and_names_the_build_script(tmp_path: Path) -> None:
    plane = ControlPlane(bin_dir=tmp_path)
    with pytest.raises(ControlPlaneError, match=r"hack/k8s/ensure-binaries\.sh"):
        plane.start()
    assert not plane.layout.root.exists()


def test_the_fixture_fails_loudly_without_binaries(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTESTED_CORTEX_CACHE", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"hack/k8s/ensure-binaries\.sh"):
        kube_plugin._bin_dir_or_fail()


def test_the_bin_dir_lives_in_the_cache_under_the_pinned_version(tmp_path: Path) -> None:
    env = {**os.environ, "ATTESTED_CORTEX_CACHE": str(tmp_path)}
    out = subprocess.run([str(SCRIPT), "--print-bin-dir"], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert Path(out).parent.parent == tmp_path / "k8s"
    assert Path(out).name == "bin"


@pytest.mark.parametrize(("args", "message"), [
    (["kube-dns"], "unknown component 'kube-dns'"),
    (["--fast"], "unknown option '--fast'"),
])
def test_the_build_script_rejects_what_it_does_not_know(tmp_path: Path, args: list[str],
                                                        message: str) -> None:
    env = {**os.environ, "ATTESTED_CORTEX_CACHE": str(tmp_path)}
    result = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.kube
def test_the_build_script_skips_what_is_already_built() -> None:
    bin_dir = binaries.bin_dir()
    assert binaries.missing(bin_dir) == []
    before = (bin_dir / "etcd").stat().st_mtime_ns
    subprocess.run([str(SCRIPT), "etcd", "helm"], check=True, capture_output=True)
    assert (bin_dir / "etcd").stat().st_mtime_ns == before
