"""An operator-managed cortex on the real node with an operator-run witness (issue 40, ADR
0102): the operator from the chart, in a namespace enforcing the restricted Pod Security
Standard. Its events are signed by its audit signer (the key in its Secret); the witness
Deployment cosigns (status.audit.witnesses shows the size); the witness pod deleted with
grace 0 comes back on its volume and resumes (its cosigned size never goes back, nothing
refused); the chain then cut back with the database's own role is refused: AuditWitnessed
False, a Warning event WitnessRefused, the cosigned size kept.

A few minutes: the chart, the database, the server and two witness pods really start."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key
from hack.support.kube import POLL_INTERVAL_S
from hack.support.waiting import wait_until

from attested_cortex.attest import notes
from tests.realnode import manifests
from tests.server.test_audit_witness import cut_back
from tests.support.realnode import RealCluster, repository_root

pytestmark = [pytest.mark.realnode, pytest.mark.slow]
CORTEX = "wit"
BASE = f"{CORTEX}-witness-w1"
API = "cortex.attested.dev/v1alpha1"


@pytest.fixture
def namespace(real_node: RealCluster) -> Iterator[str]:
    ns = f"w-{uuid.uuid4().hex[:8]}"
    real_node.kubectl("apply", "-f", "-", input=manifests.as_input([manifests.namespace(ns)]))
    chart = repository_root() / "charts" / "attested-cortex"
    # Our CRDs may be left by an earlier release on this node (another test's): this release
    # adopts them, as a second install of the chart must (Helm's ownership annotations).
    for crd in (chart / "crds-templates").glob("*.yaml"):
        name = crd.stem.split("_", 1)[1] + "." + crd.stem.split("_", 1)[0]
        real_node.kubectl("annotate", "--overwrite", "crd", name,
                          "meta.helm.sh/release-name=ac", f"meta.helm.sh/release-namespace={ns}",
                          check=False)
        real_node.kubectl("label", "--overwrite", "crd", name,
                          "app.kubernetes.io/managed-by=Helm", check=False)
    try:
        real_node.helm("install", "ac", str(chart), "-n", ns, "--set",
                       "image.pullPolicy=IfNotPresent", "--wait", "--timeout=110s")
        yield ns
    finally:
        real_node.kubectl("delete", "mcx", CORTEX, "-n", ns, "--wait=false", check=False)
        real_node.helm("uninstall", "ac", "-n", ns, "--wait", check=False)
        real_node.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
        {"apiVersion": API, "kind": "AgentIdentity", "metadata": {"name": "reader"},
         "spec": {"cortexRef": {"name": CORTEX}, "keyCustody": "Cortex",
                  "serviceAccountRef": {"name": "reader"},
                  "scopes": ["memory.read", "memory.write", "audit.read"]}},
        {"apiVersion": API, "kind": "MemoryCortex", "metadata": {"name": CORTEX},
         "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}},
                  "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                  "audit": {"witnesses": [{"name": "w1", "run": {"intervalSeconds": 5}}]}}},
    ]


def _get(cluster: RealCluster, ns: str, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-n", ns, "-o",
                                                       "json").stdout)
    return found


def _call(base: str, token: str, method: str, path: str, body: object = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}",
        "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def _witnessed(cluster: RealCluster, ns: str) -> tuple[int | None, str, str]:
    """The witness's cosigned size, and AuditWitnessed's status and reason."""
    status = _get(cluster, ns, "mcx", CORTEX).get("status") or {}
    items = (status.get("audit") or {}).get("witnesses") or [{}]
    cond: dict[str, Any] = next((c for c in status.get("conditions") or []
                                 if c["type"] == "AuditWitnessed"), {})
    return items[0].get("cosignedSize"), cond.get("status", ""), cond.get("reason", "")


def _described(cluster: RealCluster, ns: str) -> str:
    pods = cluster.kubectl("get", "pods,pvc", "-n", ns, "-o", "wide", check=False).stdout
    logs = cluster.kubectl("logs", "-n", ns, f"deploy/{BASE}", "--tail=20", check=False)
    mcx = cluster.kubectl("get", "mcx", CORTEX, "-n", ns, "-o", "yaml", check=False).stdout
    return f"{pods}\n{logs.stdout}{logs.stderr}\n{mcx[-3000:]}"


def test_an_operator_run_witness_cosigns_resumes_and_refuses(
        real_node: RealCluster, namespace: str) -> None:
    ns = namespace
    real_node.kubectl("apply", "-n", ns, "-f", "-", input=manifests.as_input(_objects()))
    ready = real_node.kubectl("wait", "-n", ns, "--for=condition=Ready", f"mcx/{CORTEX}",
                              "--timeout=110s", check=False)
    if ready.returncode != 0:
        ready = real_node.kubectl("wait", "-n", ns, "--for=condition=Ready", f"mcx/{CORTEX}",
                                  "--timeout=110s", check=False)
    assert ready.returncode == 0, _described(real_node, ns)
    service = _get(real_node, ns, "service", CORTEX)["spec"]["clusterIP"]
    base = f"http://{service}:8080"
    token = real_node.kubectl("create", "token", "reader", "-n", ns).stdout.strip()
    def store(text: str) -> Any:
        return _call(base, token, "POST", "/v1/memories", {"namespace": "realnode",
                                                           "content": text})

    wait_until(lambda: store("witnessed memory 0"), what="a store through the Service",
               seconds=60, interval_s=POLL_INTERVAL_S, ignoring=(OSError,))
    for i in range(1, 3):
        store(f"witnessed memory {i}")
    _call(base, token, "POST", "/v1/recall", {"query": "witnessed memory"})

    # Signed by its audit signer: the key in <cortex>-audit-signer signs its read records
    # and the checkpoints the witness cosigns.
    signer = _get(real_node, ns, "secret", f"{CORTEX}-audit-signer")["data"]
    fingerprint = base64.b64decode(signer["fingerprint"]).decode().strip()
    agent = base64.b64decode(signer["agent-id"]).decode().strip()
    pod_ip = _get(real_node, ns, "pod", f"{CORTEX}-db-0")["status"]["podIP"]
    uri = base64.b64decode(_get(real_node, ns, "secret", f"{CORTEX}-db-credentials")[
        "data"]["uri"]).decode()
    parts = urlsplit(uri)
    dsn = uri.replace(f"@{parts.hostname}:", f"@{pod_ip}:")

    def signed_reads() -> int:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            row = conn.execute("SELECT count(*) FROM signed_events WHERE agent_id = %s AND "
                               "key_fingerprint = %s AND event_type = 'memory.access'",
                               (agent, fingerprint)).fetchone()
        return int(row[0]) if row else 0

    wait_until(signed_reads, what="the recall's memory.access event, signed by the audit "
               "signer", seconds=60, interval_s=POLL_INTERVAL_S)
    checkpoint = _call(base, token, "GET", "/v1/audit/checkpoint")
    public = load_pem_public_key(base64.b64decode(signer["public.pem"])).public_bytes(
        Encoding.Raw, PublicFormat.Raw)
    log = notes.Verifier.parse(checkpoint["log_key"])
    assert log.public_key[-32:] == public
    notes.open_checkpoint(checkpoint["note"], log)
    assert _call(base, token, "GET", "/v1/audit/verify")["ok"] is True

    # The witness Deployment cosigns.
    seen: list[int] = []

    def cosigned(at_least: int) -> bool:
        size, status, reason = _witnessed(real_node, ns)
        if size is not None:
            seen.append(size)
        return size is not None and size >= at_least and (status, reason) == (
            "True", "Witnessed")

    first = int(checkpoint["size"])
    wait_until(lambda: cosigned(first), what=f"a cosigned size >= {first}", seconds=120,
               interval_s=POLL_INTERVAL_S)
    pods = _get(real_node, ns, "pods", "-l", "cortex.attested.dev/witness=w1")["items"]
    assert len(pods) == 1 and pods[0]["spec"]["securityContext"]["runAsNonRoot"] is True

    # Killed with grace 0, it comes back on its volume and resumes from its state.
    real_node.kubectl("delete", "pod", pods[0]["metadata"]["name"], "-n", ns,
                      "--grace-period=0", "--force", check=False)
    for i in range(3):
        store(f"while restarting {i}")
    grown = int(_call(base, token, "GET", "/v1/audit/checkpoint")["size"])
    wait_until(lambda: cosigned(grown) and len(_get(real_node, ns, "pods", "-l",
               "cortex.attested.dev/witness=w1")["items"]) == 1,
               what=f"the restarted witness cosigning size >= {grown}", seconds=180,
               interval_s=POLL_INTERVAL_S)
    assert seen == sorted(seen), f"the cosigned size went back: {seen}"
    reasons = real_node.kubectl("get", "events", "-n", ns, "--field-selector",
                                f"involvedObject.name={CORTEX},type=Warning", "-o",
                                "jsonpath={.items[*].reason}").stdout.split()
    assert "WitnessRefused" not in reasons, reasons

    # The newest events and the head deleted with the database's own role: refused.
    held = seen[-1]
    cut_back(dsn, max(held - 4, 1))
    wait_until(lambda: _witnessed(real_node, ns)[1:] == ("False", "WitnessRefused"),
               what="AuditWitnessed False (WitnessRefused)", seconds=120,
               interval_s=POLL_INTERVAL_S)
    size, _, _ = _witnessed(real_node, ns)
    assert size is not None and size >= held  # what it cosigned stands
    message = next(c["message"] for c in _get(real_node, ns, "mcx", CORTEX)["status"][
        "conditions"] if c["type"] == "AuditWitnessed")
    assert "truncated" in message and f"size {size}" in message, message
    warnings = real_node.kubectl("get", "events", "-n", ns, "--field-selector",
                                 f"involvedObject.name={CORTEX},type=Warning", "-o",
                                 "jsonpath={.items[*].reason}").stdout.split()
    assert "WitnessRefused" in warnings, warnings
