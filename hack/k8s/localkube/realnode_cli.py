"""Command line of the real node: ``hack/k8s/realnode.py up`` runs it in the foreground until
Ctrl-C or SIGTERM, then stops it; ``down`` sweeps what a killed run left behind.

Callers: hack/k8s/realnode.py (the script), the Makefile, developers. ``up`` expects the
binaries (hack/k8s/ensure-binaries.sh node) and images (hack/images/build.sh) to exist, and
says which command builds what is missing.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

from . import binaries
from .realnode import RealNode
from .waiting import ControlPlaneError

IMAGES_SCRIPT = Path(__file__).resolve().parents[2] / "images" / "build.sh"


def images_dir() -> Path:
    out = subprocess.run([str(IMAGES_SCRIPT), "--print-dir"], capture_output=True, text=True,
                         check=True)
    return Path(out.stdout.strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="realnode.py", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start and run in the foreground until Ctrl-C")
    commands.add_parser("down", help="remove what a killed run left (processes, mounts, ...)")
    return parser


def _on_stop(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def up() -> int:
    node = RealNode(bin_dir=binaries.bin_dir(), images_dir=images_dir())
    # Both set here: a process started as a shell's background job inherits SIGINT ignored,
    # and Python then leaves it so (a cold CI run's `up` outlived its Ctrl-C that way).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_stop)
    try:
        with node:
            steps = ", ".join(f"{name} {seconds}s" for name, seconds in node.timings.items())
            print(f"started in {sum(node.timings.values()):.1f}s ({steps})", flush=True)
            print(f"kubeconfig: {node.kubeconfig}\nlogs: {node.layout.run / 'logs'}\n"
                  "Ctrl-C stops the node and removes everything it made.", flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped.", flush=True)
    except ControlPlaneError as error:
        print(f"real node failed: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "down":
        try:
            RealNode(bin_dir=binaries.bin_dir(), images_dir=images_dir()).sweep()
        except ControlPlaneError as error:
            print(f"realnode down: {error}", file=sys.stderr)
            return 1
        return 0
    return up()
