"""``spec.server.tls`` on the real control plane with the real operator (ADR 0047).

selfSigned: a CA and a leaf for the Service names in Secrets, the CA published in a
ConfigMap, the pods mounting the leaf, a leaf past 2/3 of its life renewed with an
Event, and a short-lived CA renewed with an overlap (its age set through ``now`` when the test
issues it: no sleep). secretRef: the user's Secret required before the server rolls.
certManager: against cert-manager's own Certificate CRD (from its Go module; no
cert-manager controller runs here): CertManagerMissing while the CRD is absent, then the
Certificate, the server waiting for the Secret cert-manager would write, and the
Certificate removed when the spec moves to selfSigned. The CEL rule refuses anything but
exactly one mode.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from attested_cortex import pki
from tests.operator.conftest import Object, Operated, OperatorProcess, cortex
from tests.support import cnpgcrd
from tests.support.certmanagercrd import CRD_NAME, certificate_crd

pytestmark = pytest.mark.kube

SELF_SIGNED = {"tls": {"selfSigned": {}}}


@pytest.fixture(scope="module")
def without_cert_manager(kube: Kube) -> Iterator[None]:
    """cert-manager's Certificate CRD absent when the module starts; absent again after."""
    kube.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true")
    yield
    kube.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def running(without_cert_manager: None, operated: Operated) -> OperatorProcess:
    return operated.start()


def pem(secret: Object | None, key: str) -> str:
    return base64.b64decode((secret or {})["data"][key]).decode()


def names_of(operated: Operated, name: str) -> list[str]:
    service = f"{name}.{operated.namespace}"
    return [name, service, f"{service}.svc", f"{service}.svc.cluster.local", "localhost"]


def volumes_of(operated: Operated, name: str) -> dict[str, Object]:
    deploy = operated.get("deployment", f"{name}-server") or {}
    spec = ((deploy.get("spec") or {}).get("template") or {}).get("spec") or {}
    return {v["name"]: v for v in spec.get("volumes") or []}


def tls_secret(name: str, issued: pki.Issued, ca_pem: str) -> Object:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name},
            "stringData": {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem,
                           "ca.crt": ca_pem}}


def test_self_signed_makes_publishes_and_renews(operated: Operated,
                                                running: OperatorProcess) -> None:
    operated.apply(cortex("ss", server=SELF_SIGNED))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/ss", "--timeout=120s")
    ca, leaf = operated.get("secret", "ss-tls-ca"), operated.get("secret", "ss-tls")
    assert ca is not None and leaf is not None
    assert ca["type"] == leaf["type"] == "kubernetes.io/tls"
    ca_pem, leaf_pem = pem(ca, "tls.crt"), pem(leaf, "tls.crt")
    assert pki.issued_by(leaf_pem, ca_pem) and pki.covers(leaf_pem, names_of(operated, "ss"))
    assert pem(leaf, "ca.crt") == ca_pem
    assert (operated.get("configmap", "ss-ca") or {})["data"] == {"ca.crt": ca_pem}
    assert volumes_of(operated, "ss")["tls"]["secret"]["secretName"] == "ss-tls"
    status = (operated.get("MemoryCortex", "ss") or {})["status"]
    assert status["endpoint"] == f"https://ss.{operated.namespace}.svc:8080"
    service = operated.get("service", "ss") or {}
    assert service["spec"]["ports"][0]["name"] == "https"

    # A leaf 80 days into its 90 is renewed from the same CA, with an Event; the CA stays.
    old = pki.issue_leaf(pki.Issued(ca_pem, pem(ca, "tls.key")),
                         dns_names=names_of(operated, "ss"),
                         now=datetime.now(UTC) - timedelta(days=80))
    operated.apply(tls_secret("ss-tls", old, ca_pem))

    def renewed() -> str | None:
        current = pem(operated.get("secret", "ss-tls"), "tls.crt")
        return current if current not in (old.cert_pem, leaf_pem) else None

    fresh = wait_until(renewed, what="the old leaf renewed", seconds=60, interval_s=0.2)
    assert pki.issued_by(fresh, ca_pem) and not pki.renewal_due(fresh, now=datetime.now(UTC))
    assert pem(operated.get("secret", "ss-tls-ca"), "tls.crt") == ca_pem
    events = json.loads(operated.kubectl("get", "events", "-o", "json", "--field-selector",
                                         "involvedObject.name=ss").stdout)["items"]
    said = [e["message"] for e in events if e["reason"] == "CertificateRenewed"]
    assert said and "2/3 of its life has passed" in said[0]
    assert pki.fingerprint(fresh) in said[0] and "PRIVATE" not in said[0]


def ca_secret(name: str, ca: pki.Issued, successor: pki.Issued | None = None) -> Object:
    data = {"tls.crt": ca.cert_pem, "tls.key": ca.key_pem}
    if successor is not None:
        data |= {"next.crt": successor.cert_pem, "next.key": successor.key_pem}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name}, "stringData": data}


def reasons(operated: Operated, name: str) -> dict[str, list[str]]:
    events = json.loads(operated.kubectl("get", "events", "-o", "json", "--field-selector",
                                         f"involvedObject.name={name}").stdout)["items"]
    out: dict[str, list[str]] = {}
    for event in events:
        out.setdefault(event["reason"], []).append(event["message"])
    return out


def test_a_short_lived_ca_is_renewed_with_an_overlap(operated: Operated,
                                                     running: OperatorProcess) -> None:
    operated.apply(cortex("rot", server=SELF_SIGNED))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/rot", "--timeout=120s")
    now = datetime.now(UTC)

    # A 9-day CA 7 days into its life (past 2/3): a successor is published beside it, the
    # leaf stays (re-)issued by the old CA and never outlives it.
    short = pki.issue_ca("rot test CA", now=now - timedelta(days=7), days=9)
    operated.apply(ca_secret("rot-tls-ca", short))

    def published() -> str | None:
        bundle = str(((operated.get("configmap", "rot-ca") or {}).get("data") or {})["ca.crt"])
        return bundle if bundle.count("BEGIN CERTIFICATE") == 2 else None

    bundle = wait_until(published, what="the successor published", seconds=60, interval_s=0.2)
    secret = operated.get("secret", "rot-tls-ca")
    successor = pem(secret, "next.crt")
    assert pem(secret, "tls.crt") == short.cert_pem and bundle.startswith(short.cert_pem)
    assert successor in bundle and pki.load(successor).not_valid_after_utc > now + timedelta(
        days=3000)
    leaf = wait_until(lambda: (lambda p: p if pki.issued_by(p, short.cert_pem) else None)(
        pem(operated.get("secret", "rot-tls"), "tls.crt")), what="the leaf under the short CA",
        seconds=60, interval_s=0.2)
    assert pki.load(leaf).not_valid_after_utc == pki.load(short.cert_pem).not_valid_after_utc
    said = reasons(operated, "rot")["CARenewing"]
    assert pki.fingerprint(successor) in said[0] and "PRIVATE" not in said[0]

    # The same kind of CA 8 days in, its successor published 2 days ago (past the overlap):
    # the leaf moves to the successor, the old CA stays in the bundle as previous.crt.
    aged = pki.issue_ca("rot test CA", now=now - timedelta(days=8), days=9)
    heir = pki.issue_ca("rot test CA 2", now=now - timedelta(days=2))
    operated.apply(ca_secret("rot-tls-ca", aged, heir))
    moved = wait_until(lambda: (lambda p: p if pki.issued_by(p, heir.cert_pem) else None)(
        pem(operated.get("secret", "rot-tls"), "tls.crt")), what="the leaf under the successor",
        seconds=60, interval_s=0.2)
    secret = operated.get("secret", "rot-tls-ca") or {}
    assert pem(secret, "tls.crt") == heir.cert_pem and pem(secret, "previous.crt") == \
        aged.cert_pem and "next.crt" not in secret["data"]
    expected = heir.cert_pem + aged.cert_pem
    assert pem(operated.get("secret", "rot-tls"), "ca.crt") == expected
    wait_until(lambda: (operated.get("configmap", "rot-ca") or {})["data"]["ca.crt"] == expected,
               what="the bundle of both CAs", seconds=30, interval_s=0.2)
    said = reasons(operated, "rot")
    assert pki.fingerprint(heir.cert_pem) in said["CARotated"][0]
    assert any("its CA was renewed" in m and pki.fingerprint(moved) in m
               for m in said["CertificateRenewed"])


def test_secret_ref_waits_for_the_users_secret(operated: Operated,
                                               running: OperatorProcess) -> None:
    operated.apply(cortex("own", server={"tls": {"secretRef": {"name": "own-cert"}}}))
    missing = operated.wait_condition("MemoryCortex", "own", "ServerReady", "False",
                                      reason="SecretMissing", seconds=120)
    assert missing["message"].startswith("Secret own-cert (volume tls) does not exist")
    ca = pki.issue_ca("my CA", now=datetime.now(UTC))
    leaf = pki.issue_leaf(ca, dns_names=names_of(operated, "own"), now=datetime.now(UTC))
    operated.apply(tls_secret("own-cert", leaf, ca.cert_pem))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/own", "--timeout=120s")
    assert volumes_of(operated, "own")["tls"]["secret"]["secretName"] == "own-cert"
    assert operated.get("secret", "own-tls-ca") is None  # nothing made for a user's cert
    assert pem(operated.get("secret", "own-cert"), "tls.crt") == leaf.cert_pem  # untouched


def test_cert_manager_missing_then_its_certificate(operated: Operated, kube: Kube,
                                                   running: OperatorProcess) -> None:
    issuer = {"tls": {"certManager": {"issuerRef": {"name": "corp", "kind": "ClusterIssuer"}}}}
    operated.apply(cortex("cm", server=issuer))
    missing = operated.wait_condition("MemoryCortex", "cm", "ServerReady", "False",
                                      reason="CertManagerMissing", seconds=120)
    assert "certificates.cert-manager.io" in missing["message"]
    assert operated.get("deployment", "cm-server") is None

    cnpgcrd.install(kube, certificate_crd())
    certificate = wait_until(lambda: operated.get(CRD_NAME, "cm-tls"),
                             what="the Certificate", seconds=90, interval_s=0.5)
    assert certificate["spec"]["secretName"] == "cm-tls"
    assert certificate["spec"]["dnsNames"] == names_of(operated, "cm")
    assert certificate["spec"]["issuerRef"] == {"name": "corp", "kind": "ClusterIssuer",
                                                "group": "cert-manager.io"}
    assert certificate["metadata"]["ownerReferences"][0]["kind"] == "MemoryCortex"
    operated.wait_condition("MemoryCortex", "cm", "ServerReady", "False",
                            reason="SecretMissing", seconds=90)
    ca = pki.issue_ca("corp", now=datetime.now(UTC))  # what cert-manager would write
    issued = pki.issue_leaf(ca, dns_names=names_of(operated, "cm"), now=datetime.now(UTC))
    operated.apply(tls_secret("cm-tls", issued, ca.cert_pem))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/cm", "--timeout=120s")

    # To selfSigned: the Certificate goes, and the operator's own CA signs the Secret.
    operated.kubectl("patch", "mcx/cm", "--type=merge", "-p", json.dumps(
        {"spec": {"server": {"tls": {"certManager": None, "selfSigned": {}}}}}))
    wait_until(lambda: operated.get(CRD_NAME, "cm-tls") is None,
               what="the Certificate removed", seconds=60, interval_s=0.5)
    own_ca = wait_until(lambda: operated.get("secret", "cm-tls-ca"), what="the CA",
                        seconds=60, interval_s=0.5)
    wait_until(lambda: pki.issued_by(pem(operated.get("secret", "cm-tls"), "tls.crt"),
                                     pem(own_ca, "tls.crt")),
               what="the leaf reissued by the operator's CA", seconds=60, interval_s=0.5)


@pytest.mark.parametrize("tls", [{}, {"selfSigned": {}, "secretRef": {"name": "x"}}],
                         ids=["none", "two"])
def test_exactly_one_mode_is_admitted(operated: Operated, tls: Object) -> None:
    refused = operated.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump(
        cortex("cel", server={"tls": tls})))
    assert refused.returncode != 0
    assert "set exactly one of server.tls.selfSigned, server.tls.secretRef or " \
           "server.tls.certManager" in refused.stderr
