"""Fixtures of the GitOps and observability tests: the tools they run.

kstatus is built by ``make deps`` and lua5.4 installed by hack/ensure-system-packages.sh: a
test that misses either fails, naming the command (the suite's rule for its binaries).
promtool is opt-in (``make tools``: about 25 minutes cold): its test skips, naming the command.
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


@pytest.fixture(scope="session")
def promtool() -> Path:
    path = binaries.bin_dir() / "promtool"
    if not path.is_file():
        pytest.skip("promtool is not built: make tools (hack/k8s/ensure-binaries.sh promtool; "
                    "opt-in, not part of make deps)")
    return path


@pytest.fixture(scope="session")
def kstatus() -> Path:
    path = binaries.bin_dir() / "kstatus"
    if not path.is_file():
        pytest.fail("kstatus missing: run make deps (hack/k8s/ensure-binaries.sh kstatus)",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def lua() -> str:
    found = shutil.which("lua5.4")
    if found is None:
        pytest.fail("lua5.4 missing: run hack/ensure-system-packages.sh (make deps)",
                    pytrace=False)
    return found
