#!/usr/bin/env python3
"""Runs the local Kubernetes control plane: ``python hack/k8s/controlplane.py up [--dir DIR]``.

Callers: ``make run`` (via hack/run.py) and developers. A thin launcher for the ``localkube``
package beside it (importable in-process as ``hack.k8s.localkube``).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from localkube.cli import main

if __name__ == "__main__":
    sys.exit(main())
