"""Fixtures for the Helm chart tests: the helm binary, rendering, and an installed release.

``helm`` runs without a cluster (lint, template); ``release`` installs the chart into a fresh
namespace of the real control plane. Releases take the CRDs over with ``--take-ownership``
because tests/crd may have applied the same CRDs first.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hack.k8s.localkube import binaries
from hack.support.chart import CHART
from hack.support.kube import Kube

from attested_cortex.crd import KINDS

PERMISSIONS = CHART / "files" / "operator-permissions.yaml"


def helm_binary() -> Path:
    path = binaries.bin_dir() / "helm"
    if not path.is_file():
        pytest.fail(f"helm missing at {path}; run hack/k8s/ensure-binaries.sh", pytrace=False)
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm with no cluster; ``check`` raises with its output when it fails."""
    result = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {result.stdout}{result.stderr}")
    return result


def render(*sets: str, namespace: str = "cortex-system",
           api_versions: tuple[str, ...] | list[str] = ()) -> list[dict[str, Any]]:
    """The chart's objects for ``--set`` values ``sets`` (``api_versions``: what the API
    server is said to serve, as ``helm template --api-versions`` takes it)."""
    flags = [arg for value in sets for arg in ("--set", value)]
    flags += [arg for version in api_versions for arg in ("--api-versions", version)]
    out = helm("template", "rel", str(CHART), "--namespace", namespace, *flags).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def permissions() -> dict[str, list[dict[str, list[str]]]]:
    """The permissions file with ``OWN_KINDS`` written out from ``crd/kinds.KINDS`` (the
    chart writes them in from its generated CRDs: a rendered Role equal to this is the
    chart agreeing with KINDS)."""
    plurals = sorted(kind.plural for kind in KINDS)  # the chart reads crds-templates/ by name
    loaded: dict[str, list[dict[str, list[str]]]] = yaml.safe_load(PERMISSIONS.read_text())
    for rules in loaded.values():
        for rule in rules:
            rule["resources"] = [expanded for resource in rule["resources"]
                                 for expanded in _own_kinds(resource, plurals)]
    return loaded


def _own_kinds(resource: str, plurals: list[str]) -> list[str]:
    name, slash, sub = resource.partition("/")
    return [f"{plural}{slash}{sub}" for plural in plurals] if name == "OWN_KINDS" else [resource]


@pytest.fixture
def fresh_namespace(kube: Kube) -> Iterator[str]:
    """A namespace for one release, uninstalled and deleted afterwards."""
    name = f"chart-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", name)
    yield name
    for release in kube.helm("list", "-q", "-n", name, check=False).stdout.split():
        kube.helm("uninstall", release, "-n", name, check=False)
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)
