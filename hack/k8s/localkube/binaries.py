"""Finds the cached control-plane binaries built by hack/k8s/ensure-binaries.sh.

Callers: cli.py and tests/support/kube.py. The shell script is the single source of the
cache location (it reads hack/k8s/versions.env); this module only asks it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "ensure-binaries.sh"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
            "kubectl", "helm")


def bin_dir() -> Path:
    out = subprocess.run([str(SCRIPT), "--print-bin-dir"], capture_output=True, text=True,
                         check=True)
    return Path(out.stdout.strip())


def missing(directory: Path) -> list[str]:
    """The required binaries that are not (yet) built in ``directory``."""
    return [name for name in REQUIRED if not (directory / name).is_file()]


def ensure() -> Path:
    """Build whatever is missing (slow the first time) and return the bin directory."""
    subprocess.run([str(SCRIPT)], check=True)
    return bin_dir()
