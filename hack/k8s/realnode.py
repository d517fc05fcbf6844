#!/usr/bin/env python3
"""Runs the real one-node cluster: ``python hack/k8s/realnode.py up|down``.

Callers: ``make node-up`` / ``make node-down``, developers, and later ``make run``. A thin
launcher for ``localkube.realnode_cli`` (importable in-process as ``hack.k8s.localkube``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from localkube.realnode_cli import main

if __name__ == "__main__":
    sys.exit(main())
