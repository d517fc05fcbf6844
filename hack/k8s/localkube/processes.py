"""Starting and stopping one component process, with its output in a log file.

Callers: controlplane.py. Each process gets its own session (so stopping kills the whole
group) and, on Linux, a parent-death signal, so a killed test run leaves no strays.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 15.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class Component:
    """A running component: its name, process and log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start(name: str, command: list[str], *, log: Path) -> Component:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
    return Component(name=name, process=process, log=log)


def _signal_group(component: Component, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(component.process.pid, sig)


def stop(component: Component) -> None:
    """SIGTERM the component's process group, then SIGKILL what is left after a bounded wait."""
    _signal_group(component, signal.SIGTERM)
    try:
        component.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _signal_group(component, signal.SIGKILL)
        component.process.wait(timeout=STOP_TIMEOUT_S)
    _signal_group(component, signal.SIGKILL)  # children that outlived the leader
