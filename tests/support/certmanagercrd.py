"""cert-manager's Certificate CRD, from the manifests its Go module ships (``deploy/crds``).

Callers: tests/builders/test_certificates.py (the built Certificate validated against the
CRD's OpenAPI schema) and tests/operator/test_tls.py (the CRD alone installed on the
control plane: no cert-manager controller runs there, so the certManager path is tested
against the CRD's shape, ADR 0047). The module comes from the Go module cache, where
``make deps`` puts it (tests/support/gomodules.py; a test without it skips, naming that).
"""

from __future__ import annotations

import functools
from typing import Any, Final

import yaml

from tests.support.gomodules import CERT_MANAGER, module_dir

CRD_NAME: Final = "certificates.cert-manager.io"
Object = dict[str, Any]


@functools.cache
def certificate_crd() -> Object:
    """The ``certificates.cert-manager.io`` CustomResourceDefinition of that release."""
    crds = module_dir(*CERT_MANAGER) / "deploy" / "crds"
    path = crds / f"{CRD_NAME.split('.', 1)[1]}_certificates.yaml"
    with path.open() as stream:
        crd: Object = next(d for d in yaml.safe_load_all(stream) if d)
    assert crd["metadata"]["name"] == CRD_NAME
    return crd


def certificate_schema() -> Object:
    """The ``openAPIV3Schema`` of the served version (v1)."""
    version = next(v for v in certificate_crd()["spec"]["versions"] if v["name"] == "v1")
    schema: Object = version["schema"]["openAPIV3Schema"]
    return schema
