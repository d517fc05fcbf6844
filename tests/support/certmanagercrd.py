"""cert-manager's Certificate CRD, from the manifests its Go module ships (``deploy/crds``).

Callers: tests/builders/test_certificates.py (the built Certificate validated against the
CRD's OpenAPI schema) and tests/operator/test_tls.py (the CRD alone installed on the
control plane: no cert-manager controller runs there, so the certManager path is tested
against the CRD's shape, ADR 0047). The module comes from the Go module cache, downloaded
there once by ``go mod download`` when absent.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any, Final

import yaml

from attested_cortex.controller.memorycortex.tls import CERT_MANAGER_RELEASE
from tests.support.gomodules import cached_module_dir

MODULE: Final = "github.com/cert-manager/cert-manager"
CRD_NAME: Final = "certificates.cert-manager.io"
Object = dict[str, Any]


def _module_dir() -> Path:
    found = cached_module_dir(MODULE, f"v{CERT_MANAGER_RELEASE}")
    if found is not None:
        return found
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                           check=True).stdout.strip()
    here = Path(cache) / f"{MODULE}@v{CERT_MANAGER_RELEASE}"
    if here.is_dir():
        return here
    listed = subprocess.run(["go", "mod", "download", "-json",
                             f"{MODULE}@v{CERT_MANAGER_RELEASE}"],
                            capture_output=True, text=True, check=True).stdout
    return Path(json.loads(listed)["Dir"])


@functools.cache
def certificate_crd() -> Object:
    """The ``certificates.cert-manager.io`` CustomResourceDefinition of that release."""
    path = _module_dir() / "deploy" / "crds" / f"{CRD_NAME.split('.', 1)[1]}_certificates.yaml"
    with path.open() as stream:
        crd: Object = next(d for d in yaml.safe_load_all(stream) if d)
    assert crd["metadata"]["name"] == CRD_NAME
    return crd


def certificate_schema() -> Object:
    """The ``openAPIV3Schema`` of the served version (v1)."""
    version = next(v for v in certificate_crd()["spec"]["versions"] if v["name"] == "v1")
    schema: Object = version["schema"]["openAPIV3Schema"]
    return schema
