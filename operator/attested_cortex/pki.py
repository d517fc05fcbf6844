"""X.509 for the cortex's TLS: the operator's own CA and server leaf, and the checks on them.

The operator's ``selfSigned`` mode (ADR 0047) issues one CA per cortex and a leaf for the
server's Service names from it; the controller calls :func:`issue_ca` and :func:`issue_leaf`
with the time and hands the PEM to a pure builder (builders draw no randomness), and asks
:func:`renewal_due` / :func:`issued_by` / :func:`covers` of what it finds in the Secrets on
every pass, and :func:`ca_rotation` of the CA (renewed with an overlap: a successor is
published beside it before any leaf moves to it). Clients (``cortexctl doctor``,
``cortexctl mcp``, the hook sidecars) build their verifying context with
:func:`client_context`. Everything is the ``cryptography`` library's; nothing here is
hand-rolled. Synchronous and free of I/O but for the CA file a client names.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: A leaf is renewed once this share of its life has passed (cert-manager's default too).
RENEW_AT: Final = 2 / 3
#: The CA's successor is published in the bundle at RENEW_AT of the CA's life, and leaves
#: move to it at SWITCH_AT, once the successor has been published for at least the share
#: between the two (so a client that refreshes its bundle within that overlap never fails).
SWITCH_AT: Final = 5 / 6
CA_DAYS: Final = 3650
LEAF_DAYS: Final = 90
#: Issued a little in the past, so a node whose clock lags does not refuse a fresh leaf.
BACKDATE: Final = timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, both PEM (the key PKCS#8, unencrypted)."""

    cert_pem: str
    key_pem: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])


def issue_ca(common_name: str, *, now: datetime, days: int = CA_DAYS) -> Issued:
    """A self-signed CA (P-256, path length 0: it signs leaves only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256()))
    return Issued(_cert_pem(cert), _key_pem(key))


def _alt_names(dns_names: Sequence[str],
               ip_addresses: Sequence[str]) -> x509.SubjectAlternativeName:
    general: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    general += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    return x509.SubjectAlternativeName(general)


def issue_leaf(ca: Issued, *, dns_names: Sequence[str], ip_addresses: Sequence[str] = (),
               now: datetime, days: int = LEAF_DAYS, client: bool = False) -> Issued:
    """A server certificate for ``dns_names`` (the first is its common name) signed by
    ``ca``; ``client``: a TLS client certificate instead (federation's peer identity, its
    common name the cortex id, docs/adr/0121)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    # A leaf never outlives its CA (a CA near its end issues short leaves, renewed early).
    not_after = min(now + timedelta(days=days), ca_cert.not_valid_after_utc)
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (x509.CertificateBuilder().subject_name(_name(dns_names[0]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                         key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                  else ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(_alt_names(dns_names, ip_addresses), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
                ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return Issued(_cert_pem(cert), _key_pem(key))


def load(cert_pem: str) -> x509.Certificate:
    """The first certificate of a PEM text; ``ValueError`` when there is none."""
    return x509.load_pem_x509_certificate(cert_pem.encode())


def renewal_due(cert_pem: str, *, now: datetime, at: float = RENEW_AT) -> bool:
    """Whether ``at`` of the certificate's life has passed (or it cannot be read)."""
    try:
        cert = load(cert_pem)
    except ValueError:
        return True
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now >= start + (end - start) * at


CaStep = Literal["keep", "publish", "switch"]


def _life(cert_pem: str) -> tuple[datetime, datetime]:
    cert = load(cert_pem)
    return cert.not_valid_before_utc, cert.not_valid_after_utc


def ca_step_due(active_pem: str, successor_pem: str | None) -> datetime | None:
    """When the CA's next step (:func:`ca_rotation`) is due; None: at once (unreadable)."""
    try:
        start, end = _life(active_pem)
    except ValueError:
        return None
    if successor_pem is None:
        return start + (end - start) * RENEW_AT
    try:
        published, _ = _life(successor_pem)
    except ValueError:
        return end  # an unreadable successor is never switched to: replaced at the end
    overlap = (end - start) * (SWITCH_AT - RENEW_AT)
    return min(end, max(start + (end - start) * SWITCH_AT, published + BACKDATE + overlap))


def ca_rotation(active_pem: str, successor_pem: str | None, *, now: datetime) -> CaStep:
    """What the selfSigned CA needs now: ``publish`` a successor beside it (RENEW_AT of its
    life has passed and there is none yet), ``switch`` the leaves to the successor (SWITCH_AT
    has passed and the successor has been published for the overlap; at once when the CA has
    expired or cannot be read), or ``keep``."""
    due = ca_step_due(active_pem, successor_pem)
    if due is not None and now < due:
        return "keep"
    if successor_pem is None:
        return "publish"
    try:
        load(successor_pem)
    except ValueError:
        return "publish"  # the CA is at its end and its successor unreadable: a new one
    return "switch"


def expired(cert_pem: str, *, now: datetime) -> bool:
    """Whether the certificate's life has ended (or it cannot be read)."""
    try:
        return now >= _life(cert_pem)[1]
    except ValueError:
        return True


def issued_by(cert_pem: str, ca_pem: str) -> bool:
    """Whether ``ca_pem``'s key signed ``cert_pem`` (False for anything unreadable)."""
    try:
        load(cert_pem).verify_directly_issued_by(load(ca_pem))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def covers(cert_pem: str, dns_names: Sequence[str]) -> bool:
    """Whether the certificate names every one of ``dns_names``."""
    try:
        san = load(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (ValueError, x509.ExtensionNotFound):
        return False
    return set(dns_names) <= set(san.value.get_values_for_type(x509.DNSName))


def fingerprint(cert_pem: str) -> str:
    """SHA-256 of the certificate's DER, hex (what a log line may name; never the key)."""
    return load(cert_pem).fingerprint(hashes.SHA256()).hex()


def client_context(ca_file: Path | None) -> ssl.SSLContext:
    """A verifying client context, TLS 1.2 or later: trusting ``ca_file`` when given, else
    the system's roots."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def client_name(cert_der: bytes, bundle_pem: str) -> str | None:
    """The common name of a TLS client certificate that one of the CAs of ``bundle_pem``
    issued directly and that is meant for client authentication; None otherwise (another
    CA's certificate, a server certificate, anything unreadable)."""
    try:
        cert = x509.load_der_x509_certificate(cert_der)
        cas = x509.load_pem_x509_certificates(bundle_pem.encode())
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    if ExtendedKeyUsageOID.CLIENT_AUTH not in usage:
        return None
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return str(names[0].value) if names else None
    return None
