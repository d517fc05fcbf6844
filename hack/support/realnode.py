"""Whether the real one-node cluster can run on this host, and if not, what builds the rest.

Callers: tests/support/realnode.py (skips every ``realnode`` test with these reasons) and the
benchmarks that need the node (bench/ha.py, bench/backup_physical.py), which skip the same way.
"""

from __future__ import annotations

import os
import subprocess

from hack.k8s.localkube import binaries
from hack.k8s.localkube.realnode import missing_binaries, missing_host_commands, missing_images
from hack.k8s.localkube.realnode_cli import images_dir


def missing_pieces() -> list[str]:
    """Why the real node cannot run here (empty: it can)."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("not root")
    if missing := missing_host_commands():
        reasons.append(f"packages {missing} (hack/k8s/ensure-node-packages.sh)")
    bin_dir = binaries.bin_dir()
    if missing := binaries.missing(bin_dir) + missing_binaries(bin_dir):
        reasons.append(f"binaries {missing} (hack/k8s/ensure-binaries.sh node)")
    try:
        images = images_dir()
    except (OSError, subprocess.CalledProcessError):
        reasons.append("images (hack/images/build.sh)")
    else:
        if missing := missing_images(images):
            reasons.append(f"images {missing} (hack/images/build.sh)")
    return reasons
