"""Command line: ``python hack/k8s/controlplane.py up [--dir DIR]``.

Callers: hack/k8s/controlplane.py (the script), ``make run`` and developers. Builds missing
binaries, starts the control plane, prints the admin kubeconfig path and runs in the
foreground until Ctrl-C or SIGTERM, then stops everything. ``--dir`` keeps the files (logs,
certificates) after exit; without it a temporary directory is used and removed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from . import binaries
from .controlplane import ControlPlane, ControlPlaneError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="controlplane.py", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start and run in the foreground until Ctrl-C")
    up.add_argument("--dir", type=Path, help="keep files here (default: a temp dir, removed)")
    commands.add_parser("bin-dir", help="print the directory of the cached binaries")
    return parser


def _on_stop(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def up(directory: Path | None) -> int:
    plane = ControlPlane(bin_dir=binaries.ensure(), root=directory)
    # Both set here: a process started as a shell's background job inherits SIGINT ignored,
    # and Python then leaves it so (a cold CI run's `up` outlived its Ctrl-C that way).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_stop)
    try:
        with plane:
            print(f"kubeconfig: {plane.kubeconfig}\nserver: {plane.server}\n"
                  f"logs: {plane.layout.logs}\nCtrl-C stops the control plane.", flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped.", flush=True)
    except ControlPlaneError as error:
        print(f"control plane failed: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "bin-dir":
        print(binaries.bin_dir())
        return 0
    return up(args.dir)
