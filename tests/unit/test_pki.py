"""pki: the operator's CA and leaf, and the checks the renewal decision is made of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography import x509

from attested_cortex import pki

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_a_leaf_is_due_at_life_of_its_life() -> None:
    ca = pki.issue_ca("ca", now=NOW)
    leaf = pki.issue_leaf(ca, dns_names=["svc", "svc.ns.svc"], ip_addresses=["127.0.0.1"],
                          now=NOW)
    start = NOW - pki.BACKDATE
    life = timedelta(days=pki.LEAF_DAYS) + pki.BACKDATE
    assert not pki.renewal_due(leaf.cert_pem, now=start + life * 0.66)
    assert pki.renewal_due(leaf.cert_pem, now=start + life * 0.67)
    assert pki.renewal_due("not a certificate", now=NOW)


def test_the_leaf_is_a_server_certificate_of_its_ca_only() -> None:
    ca, other = pki.issue_ca("ca", now=NOW), pki.issue_ca("other", now=NOW)
    leaf = pki.issue_leaf(ca, dns_names=["svc", "svc.ns.svc"], ip_addresses=["127.0.0.1"],
                          now=NOW)
    assert pki.issued_by(leaf.cert_pem, ca.cert_pem)
    assert not pki.issued_by(leaf.cert_pem, other.cert_pem)
    assert pki.covers(leaf.cert_pem, ["svc.ns.svc"]) and not pki.covers(leaf.cert_pem, ["x"])
    cert = pki.load(leaf.cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert pki.load(ca.cert_pem).extensions.get_extension_for_class(
        x509.BasicConstraints).value.path_length == 0
    assert "PRIVATE KEY" in leaf.key_pem and "PRIVATE KEY" not in leaf.cert_pem
