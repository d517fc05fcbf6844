"""Fixtures of the GitOps and observability tests: the opt-in tools they run.

promtool and kstatus are built only on request (``hack/k8s/ensure-binaries.sh tools``); a test
that needs one skips, naming that command, when it is not built.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hack.k8s.localkube import binaries

# The fixtures of the two operator test speeds, shared here: the real operator on the real
# control plane, and the in-memory cluster the same reconcile code runs on.
from tests.controller_fast.conftest import op  # noqa: F401
from tests.operator.conftest import operated, operator  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "attested-cortex"
RULES = CHART / "files" / "prometheus-rules.yaml"
DASHBOARD = CHART / "files" / "grafana-dashboard.json"


def tool(name: str) -> Path:
    """The opt-in tool ``name`` from the build cache, or a skip that says how to build it."""
    path = binaries.bin_dir() / name
    if not path.is_file():
        pytest.skip(f"{name} is not built: run hack/k8s/ensure-binaries.sh {name} "
                    "(an opt-in build group, not part of make deps)")
    return path


@pytest.fixture(scope="session")
def promtool() -> Path:
    return tool("promtool")


@pytest.fixture(scope="session")
def kstatus() -> Path:
    return tool("kstatus")


@pytest.fixture(scope="session")
def lua() -> str:
    found = shutil.which("lua5.4")
    if found is None:
        pytest.skip("lua5.4 is not installed (Debian package lua5.4: apt-get install lua5.4)")
    return found
