"""TLS of the cortex server on the real node, cert-manager absent (ADR 0047).

selfSigned: the operator's CA and certificate; the pods pass their HTTPS probes; a client
outside the cluster (through ``kubectl port-forward``) verifies the server with the CA from
ConfigMap ``<cortex>-ca`` and ``cortexctl doctor --ca-file`` does too; the auto-link hook
sidecar calls its own server back over HTTPS (verifying with the CA mounted alone); a leaf
made old is renewed by the operator and served by the running pod without a restart.
secretRef: a certificate of our own CA is served, and replacing it in the Secret is served
by the same pod (no restart). Written for ``make e2e``; needs the real node.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hack.support.waiting import wait_until

from attested_cortex import pki
from attested_cortex.server.tokens import generate
from e2e.conftest import TARGET, kubectl, kubectl_json
from e2e.manifests import GROUP, SERVER_IMAGE

WAIT = "240s"
#: The kubelet syncs a Secret volume within about a minute; the server looks every 10 s.
RELOAD_S = 180
AGENT = "e2e:tls-agent"


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def apply(*objects: dict[str, Any]) -> None:
    ok(kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)})))


def tokens_secret(namespace: str, name: str) -> tuple[dict[str, Any], str]:
    token, digest = generate()
    return ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name,
                                                                 "namespace": namespace},
             "stringData": {"tokens": f"{digest} {AGENT}\n"}}, token)


def cortex(namespace: str, name: str, tls: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "MemoryCortex",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}},
                     "server": {"replicas": 1, "tls": tls, "auth": {
                         "mode": "Tokens",
                         "tokensSecretRef": {"name": f"{name}-tokens", "key": "tokens"}}}}}


def autolink(namespace: str, name: str, token: str) -> dict[str, Any]:
    """The reference auto-link hook as a sidecar calling its server back with our token."""
    return {"apiVersion": GROUP, "kind": "HookChain",
            "metadata": {"name": f"{name}-links", "namespace": namespace},
            "spec": {"cortexRef": {"name": name}, "hooks": [{
                "name": "auto-link", "events": ["post_store"], "mode": "Daemon",
                "timeoutMs": 500, "sidecar": {
                    "image": SERVER_IMAGE, "env": [{"name": "CORTEX_TOKEN", "value": token}],
                    "command": ["cortexctl", "hookd", "--listen",
                                "unix:///var/run/cortex/hooks/auto-link.sock", "--",
                                "python3", "-m", "attested_cortex.hooks.reference.autolink"]}}]}}


class Forward:
    """``kubectl port-forward`` of a cortex Service to 127.0.0.1 (a name its certificate
    carries)."""

    def __init__(self, namespace: str, service: str) -> None:
        self.process = subprocess.Popen(
            ["kubectl", "port-forward", "-n", namespace, f"svc/{service}", "0:8080",
             "--address", "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=TARGET.env())
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"port-forward said: {line}"
        self.port = int(found.group(1))
        self.base = f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def call(forward: Forward, ca: Path, token: str, method: str, path: str,
         body: object = None) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 (https://127.0.0.1 of the forward)
        forward.base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=15,  # noqa: S310
                                    context=pki.client_context(ca)) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def served_fingerprint(forward: Forward) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", forward.port), timeout=10) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def secret_pem(namespace: str, name: str, key: str) -> str:
    data = kubectl_json("get", "secret", name, "-n", namespace)["data"]
    return base64.b64decode(data[key]).decode()


def server_pod(namespace: str, name: str) -> tuple[str, int]:
    pods = kubectl_json("get", "pods", "-n", namespace, "-l",
                        f"app.kubernetes.io/instance={name},app.kubernetes.io/component=server")
    running = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    assert len(running) == 1, [p["metadata"]["name"] for p in running]
    pod = running[0]
    return pod["metadata"]["uid"], sum(c.get("restartCount", 0)
                                       for c in pod["status"].get("containerStatuses", []))


def names_of(namespace: str, name: str) -> list[str]:
    return [name, f"{name}.{namespace}", f"{name}.{namespace}.svc",
            f"{name}.{namespace}.svc.cluster.local", "localhost"]


def ready(namespace: str, name: str) -> None:
    result = kubectl("wait", "-n", namespace, "--for=condition=Ready", f"--timeout={WAIT}",
                     f"memorycortex/{name}")
    if result.returncode != 0:
        pytest.fail(f"{name} not Ready: {result.stderr}\n" + kubectl(
            "get", "-n", namespace, "mcx,pods,jobs", "-o", "wide").stdout)


@pytest.fixture(scope="module")
def self_signed(namespace: str, tmp_path_factory: pytest.TempPathFactory,
                ) -> Iterator[tuple[Forward, Path, str]]:
    name = "e2e-tls-ss"
    secret, token = tokens_secret(namespace, f"{name}-tokens")
    apply(secret, cortex(namespace, name, {"selfSigned": {}}), autolink(namespace, name, token))
    ready(namespace, name)
    ca = tmp_path_factory.mktemp("tls") / "ca.crt"
    ca.write_text(kubectl_json("get", "configmap", f"{name}-ca", "-n", namespace)
                  ["data"]["ca.crt"])
    forward = Forward(namespace, name)
    yield forward, ca, token
    forward.stop()
    kubectl("delete", "mcx", name, "-n", namespace, "--wait=false")


def test_self_signed_is_verified_from_outside_and_by_the_sidecar(
        self_signed: tuple[Forward, Path, str], namespace: str) -> None:
    forward, ca, token = self_signed
    first = call(forward, ca, token, "POST", "/v1/memories", {
        "namespace": "tls", "content": "the deploy runbook for the payments service"})
    assert first[0] == 201, first
    second = call(forward, ca, token, "POST", "/v1/memories", {
        "namespace": "tls", "content": "the deploy runbook for the payments service, v2"})
    assert second[0] == 201, second

    def linked() -> bool:  # the sidecar recalled and linked over https://127.0.0.1
        status, body = call(forward, ca, token, "GET",
                            f"/v1/kg/timeline?memory_id={second[1]['id']}")
        return status == 200 and bool(body.get("links"))
    wait_until(linked, what="the auto-link sidecar's link", seconds=60, interval_s=1)
    doctor = subprocess.run([sys.executable, "-m", "attested_cortex", "doctor", "--server",
                             forward.base, "--token", token, "--ca-file", str(ca)],
                            capture_output=True, text=True, timeout=60)
    assert doctor.returncode == 0, doctor.stderr
    with pytest.raises(urllib.error.URLError):  # not trusted without the CA
        urllib.request.urlopen(f"{forward.base}/healthz", timeout=10)  # noqa: S310


def test_an_old_leaf_is_renewed_and_served_without_a_restart(
        self_signed: tuple[Forward, Path, str], namespace: str) -> None:
    forward, _, _ = self_signed
    name = "e2e-tls-ss"
    pod = server_pod(namespace, name)
    ca = pki.Issued(secret_pem(namespace, f"{name}-tls-ca", "tls.crt"),
                    secret_pem(namespace, f"{name}-tls-ca", "tls.key"))
    old = pki.issue_leaf(ca, dns_names=names_of(namespace, name), ip_addresses=["127.0.0.1"],
                         now=datetime.now(UTC) - timedelta(days=80))
    apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": f"{name}-tls", "namespace": namespace},
           "stringData": {"tls.crt": old.cert_pem, "tls.key": old.key_pem,
                          "ca.crt": ca.cert_pem}})
    renewed = wait_until(
        lambda: (lambda pem: pem if pem != old.cert_pem else None)(
            secret_pem(namespace, f"{name}-tls", "tls.crt")),
        what="the operator's renewal", seconds=60, interval_s=1)
    wait_until(lambda: served_fingerprint(forward) == pki.fingerprint(renewed),
               what="the pod serving the renewed certificate", seconds=RELOAD_S, interval_s=2)
    assert server_pod(namespace, name) == pod  # same pod, no restart


def test_secret_ref_is_served_and_replaced_in_place(
        namespace: str, tmp_path: Path) -> None:
    name = "e2e-tls-own"
    ca = pki.issue_ca("e2e own CA", now=datetime.now(UTC))
    (tmp_path / "ca.crt").write_text(ca.cert_pem)

    def leaf_secret() -> tuple[dict[str, Any], str]:
        leaf = pki.issue_leaf(ca, dns_names=names_of(namespace, name),
                              ip_addresses=["127.0.0.1"], now=datetime.now(UTC))
        return ({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                 "metadata": {"name": f"{name}-cert", "namespace": namespace},
                 "stringData": {"tls.crt": leaf.cert_pem, "tls.key": leaf.key_pem,
                                "ca.crt": ca.cert_pem}}, leaf.cert_pem)

    tokens, token = tokens_secret(namespace, f"{name}-tokens")
    first, first_pem = leaf_secret()
    apply(tokens, first, cortex(namespace, name, {"secretRef": {"name": f"{name}-cert"}}))
    ready(namespace, name)
    forward = Forward(namespace, name)
    try:
        assert call(forward, tmp_path / "ca.crt", token, "GET", "/v1/capabilities")[0] == 200
        assert served_fingerprint(forward) == pki.fingerprint(first_pem)
        pod = server_pod(namespace, name)
        second, second_pem = leaf_secret()
        apply(second)
        wait_until(lambda: served_fingerprint(forward) == pki.fingerprint(second_pem),
                   what="the replaced certificate served", seconds=RELOAD_S, interval_s=2)
        assert server_pod(namespace, name) == pod
        assert kubectl("get", "secret", f"{name}-tls-ca", "-n", namespace).returncode != 0
    finally:
        forward.stop()
        kubectl("delete", "mcx", name, "-n", namespace, "--wait=false")
