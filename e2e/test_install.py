"""The installed chart: CRDs established, the operator running and ready under the
restricted Pod Security Standard, admission enforcing the CRD rules."""

from __future__ import annotations

from e2e.conftest import kubectl, kubectl_json

KINDS = ("memorycortexes", "hookchains", "permissionrules", "agentidentities")
# The chart's operator only: the operator's own workloads share app.kubernetes.io/name.
OPERATOR = "app.kubernetes.io/name=attested-cortex,app.kubernetes.io/component=operator"


def test_crds_are_established() -> None:
    for plural in KINDS:
        result = kubectl("wait", "--for=condition=Established", "--timeout=60s",
                         f"crd/{plural}.cortex.attested.dev")
        assert result.returncode == 0, result.stderr


def test_operator_is_available(namespace: str) -> None:
    result = kubectl("-n", namespace, "wait", "--for=condition=Available", "--timeout=180s",
                     "deployment", "-l", OPERATOR)
    assert result.returncode == 0, result.stderr
    pods = kubectl_json("-n", namespace, "get", "pods", "-l", OPERATOR)
    assert pods["items"] and all(p["status"]["phase"] == "Running" for p in pods["items"])


def test_admission_rejects_an_invalid_cortex(namespace: str) -> None:
    manifest = f"""
apiVersion: cortex.attested.dev/v1alpha1
kind: MemoryCortex
metadata: {{name: both-databases, namespace: {namespace}}}
spec:
  database:
    managed: {{}}
    external: {{secretRef: {{name: pg, key: uri}}}}
"""
    result = kubectl("apply", "-f", "-", input=manifest)
    assert result.returncode != 0
    assert ("set exactly one of database.managed, database.external or "
            "database.cloudNativePG") in result.stderr
