"""Admission of custom resources by the real API server: valid objects are accepted with
their defaults, each invalid one is rejected with the message meant for that mistake.

The objects and verdicts are in ``cases.py``; fixtures in ``conftest.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hack.support.kube import Kube

from tests.crd.cases import CREATE_CASES, UPDATE_CASES, Case, Manifest, cortex

pytestmark = pytest.mark.kube


def submit(kube: Kube, namespace: str, manifest: Manifest, *verb: str) -> tuple[bool, str]:
    """Send ``manifest``; returns whether it was accepted and kubectl's output."""
    result = kube.kubectl(
        *verb, "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False
    )
    return result.returncode == 0, result.stdout + result.stderr


def get(kube: Kube, namespace: str, resource: str) -> dict[str, Any]:
    result = kube.kubectl("get", "-n", namespace, resource, "-o", "json")
    found: dict[str, Any] = json.loads(result.stdout)
    return found


@pytest.mark.parametrize("case", CREATE_CASES, ids=lambda c: c.id)
def test_create(crds: Kube, namespace: str, case: Case) -> None:
    accepted, output = submit(crds, namespace, case.manifest, "create")
    if case.error is None:
        assert accepted, output
    else:
        assert not accepted, f"{case.id} was accepted"
        assert case.error in output


@pytest.mark.parametrize(
    ("original", "updated", "error"),
    [case[1:] for case in UPDATE_CASES],
    ids=[c[0] for c in UPDATE_CASES],
)
def test_update(
    crds: Kube, namespace: str, original: Manifest, updated: Manifest, error: str | None
) -> None:
    apply = ("apply", "--server-side", "--field-manager=test")
    accepted, output = submit(crds, namespace, original, *apply)
    assert accepted, output
    accepted, output = submit(crds, namespace, updated, *apply)
    assert accepted == (error is None), output
    if error is not None:
        assert error in output


def test_defaults_are_filled_in(crds: Kube, namespace: str) -> None:
    submit(crds, namespace, cortex("defaults"), "create")
    spec = get(crds, namespace, "memorycortex/defaults")["spec"]
    assert spec["server"] == {"replicas": 1, "service": {"type": "ClusterIP", "port": 8080},
                              "auth": {"mode": "Kubernetes"}, "logLevel": "Info"}
    assert spec["database"]["managed"]["storage"] == {"size": "10Gi"}
    assert spec["permissions"] == {"mode": "Advisory", "writeDefault": "Allow"}
    assert spec["embedding"] == {"mode": "MiniLM", "timeoutMs": 1000}  # docs/adr/0097
    assert spec["audit"] == {"signer": {"mode": "Operator"}, "recordReads": True}
    assert spec["database"]["timeouts"] == {"lockMs": 5000, "statementMs": 30000,
                                            "writeMs": 10000}
    assert spec["limits"]["maxAnswerBytes"] == 4194304
    assert spec["limits"]["maxImportBytes"] == 64 * 1024 * 1024
    assert spec["limits"]["maxStagedBytesPerAgent"] == 256 * 1024 * 1024
    assert spec["graph"] == {"backend": "Auto"}
    assert spec["paused"] is False


def patch_status(kube: Kube, namespace: str, name: str, status: dict[str, Any]) -> tuple[bool, str]:
    patch = json.dumps({"status": status})
    result = kube.kubectl(
        "patch",
        "-n",
        namespace,
        "memorycortex",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
        check=False,
    )
    return result.returncode == 0, result.stdout + result.stderr


def ready(status: str, message: str = "all good") -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": status,
        "reason": "Reconciled",
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    }


def test_status_takes_conditions_and_shows_them_in_columns(crds: Kube, namespace: str) -> None:
    submit(crds, namespace, cortex("status"), "create")
    accepted, output = patch_status(
        crds,
        namespace,
        "status",
        {
            "observedGeneration": 1,
            "conditions": [ready("True", "serving at 10.0.0.1")],
            "schemaVersion": 3,
            "kgBackend": "age",
            "databaseMode": "CloudNativePG",
            "primary": "status-db-2",
        },
    )
    assert accepted, output
    wide = crds.kubectl("get", "-n", namespace, "mcx", "status", "-o", "wide").stdout
    header, row = wide.splitlines()
    assert header.split()[:7] == ["NAME", "READY", "REASON", "DATABASE", "PRIMARY", "SCHEMA",
                                  "GRAPH"]
    assert "MESSAGE" in header
    assert row.split()[:7] == ["status", "True", "Reconciled", "CloudNativePG", "status-db-2",
                               "3", "age"]
    assert "serving at 10.0.0.1" in row


def test_status_rejects_a_malformed_condition(crds: Kube, namespace: str) -> None:
    submit(crds, namespace, cortex("badstatus"), "create")
    accepted, output = patch_status(crds, namespace, "badstatus", {"conditions": [ready("Maybe")]})
    assert not accepted
    assert 'status.conditions[0].status: Unsupported value: "Maybe"' in output
    accepted, output = patch_status(
        crds, namespace, "badstatus", {"conditions": [{**ready("True"), "reason": "not camel"}]}
    )
    assert not accepted
    assert 'status.conditions[0].reason: Invalid value: "not camel"' in output
    assert "reason in body should match" in output


def test_kubectl_explain_shows_field_descriptions(crds: Kube) -> None:
    explained = crds.kubectl("explain", "memorycortexes.spec.server.replicas").stdout
    assert "Number of server pods" in explained
    explained = crds.kubectl("explain", "hookchains.spec.hooks.timeoutMs").stdout
    assert "at most the event class deadline" in explained
    explained = crds.kubectl("explain", "memorycortexes.spec.permissions.writeDefault").stdout
    assert "deny-first" in explained
    explained = crds.kubectl("explain", "agentidentities.spec.quotas.storage").stdout
    assert "quotas.storagePerAgent when absent" in explained


def test_short_names_and_category_list_every_kind(crds: Kube, namespace: str) -> None:
    for manifest in (cortex("listed"),):
        submit(crds, namespace, manifest, "create")
    for short in ("mcx", "hc", "prule", "aid"):
        crds.kubectl("get", "-n", namespace, short)
    listed = crds.kubectl("get", "-n", namespace, "cortex", "-o", "name").stdout
    assert "memorycortex.cortex.attested.dev/listed" in listed
