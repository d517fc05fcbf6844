"""End-to-end checks against a real cluster with the chart installed (``make e2e-kind``).

Needs ``KUBECONFIG`` pointing at the cluster and ``E2E_NAMESPACE`` naming the release
namespace; both are set by e2e/kind.sh. Not part of ``make test``.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest


def kubectl(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run kubectl against the e2e cluster."""
    return subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True,
                          timeout=180, check=False)


def kubectl_json(*args: str) -> Any:
    """kubectl ... -o json, parsed (fails the test on error)."""
    result = kubectl(*args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="session")
def namespace() -> str:
    """The release namespace."""
    if "KUBECONFIG" not in os.environ:
        pytest.fail("run through `make e2e-kind` (KUBECONFIG and E2E_NAMESPACE unset)")
    return os.environ.get("E2E_NAMESPACE", "attested-cortex-system")
