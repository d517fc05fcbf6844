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


def verifies(bundle: list[str], leaf_pem: str, at: datetime) -> bool:
    """Whether a client trusting ``bundle`` accepts ``leaf_pem`` for ``svc`` at ``at``
    (cryptography's own path validation, as a TLS client does it)."""
    from cryptography.x509 import DNSName
    from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

    store = Store([pki.load(p) for p in bundle])
    verifier = PolicyBuilder().store(store).time(at).build_server_verifier(DNSName("svc"))
    try:
        verifier.verify(pki.load(leaf_pem), [])
    except VerificationError:
        return False
    return True


def test_the_ca_is_renewed_with_an_overlap_driven_by_now() -> None:
    """A 9-day CA: successor published at 6 days (2/3), leaves moved at 7.5 days (5/6); a
    client holding only the old CA verifies every leaf served until the switch, one that
    fetched the bundle verifies them all."""
    old = pki.issue_ca("ca", now=NOW, days=9)
    life = timedelta(days=9) + pki.BACKDATE
    start = NOW - pki.BACKDATE
    assert pki.ca_rotation(old.cert_pem, None, now=start + life * 0.66) == "keep"
    published = start + life * 0.67
    assert pki.ca_rotation(old.cert_pem, None, now=published) == "publish"
    new = pki.issue_ca("ca 2", now=published)
    # Overlap: the switch waits for 5/6 of the old life and 1/6 of it since publishing.
    assert pki.ca_rotation(old.cert_pem, new.cert_pem, now=start + life * 0.83) == "keep"
    switch = start + life * 0.84
    assert pki.ca_rotation(old.cert_pem, new.cert_pem, now=switch) == "switch"
    due = pki.ca_step_due(old.cert_pem, new.cert_pem)
    assert due is not None and abs(due - (published + life / 6)) < timedelta(seconds=1)

    before = pki.issue_leaf(old, dns_names=["svc"], now=published)
    after = pki.issue_leaf(new, dns_names=["svc"], now=switch)
    assert pki.load(before.cert_pem).not_valid_after_utc == pki.load(
        old.cert_pem).not_valid_after_utc  # a leaf never outlives its CA
    assert verifies([old.cert_pem], before.cert_pem, published)
    assert verifies([old.cert_pem, new.cert_pem], before.cert_pem, published)
    assert verifies([new.cert_pem, old.cert_pem], after.cert_pem, switch)
    assert not verifies([old.cert_pem], after.cert_pem, switch)
    assert not pki.expired(old.cert_pem, now=switch)
    assert pki.expired(old.cert_pem, now=start + life)


def test_a_successor_published_late_still_gets_its_overlap() -> None:
    old = pki.issue_ca("ca", now=NOW, days=9)
    life = timedelta(days=9) + pki.BACKDATE
    start = NOW - pki.BACKDATE
    late = start + life * 0.80  # the operator was down at 2/3
    new = pki.issue_ca("ca 2", now=late)
    assert pki.ca_rotation(old.cert_pem, new.cert_pem, now=start + life * 0.9) == "keep"
    assert pki.ca_rotation(old.cert_pem, new.cert_pem, now=late + life / 6) == "switch"
    # ...but never past the old CA's end.
    later = pki.issue_ca("ca 3", now=start + life * 0.95)
    assert pki.ca_rotation(old.cert_pem, later.cert_pem, now=start + life) == "switch"
    assert pki.ca_rotation("junk", None, now=NOW) == "publish"
