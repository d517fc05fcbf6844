"""Certificates and keys for a local control plane, made with the ``openssl`` command.

Callers: controlplane.py. One CA signs the API server's serving certificate and a client
certificate per identity; a separate key pair signs service-account tokens. ECDSA P-256 keys
keep generation fast. Keys are written 0600 and never printed.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .layouts import LOOPBACK, Layout

CA = "ca"
APISERVER = "apiserver"
SERVICE_ACCOUNT = "service-account"
CLUSTER_SERVICE_IP = "10.0.0.1"
_DAYS = "30"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate's subject: the user name and the groups the API server sees."""

    name: str
    user: str
    groups: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        return "".join(f"/O={group}" for group in self.groups) + f"/CN={self.user}"


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


# Python 3.13 verifies with X509_STRICT by default: a CA needs keyUsage and a subject key id,
# a leaf an authority key id. Without them in-cluster Python clients (the operator) fail with
# "CA cert does not include key usage extension".
_CA_EXTENSIONS = ("basicConstraints=critical,CA:TRUE",
                  "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
                  "subjectKeyIdentifier=hash")
_LEAF_EXTENSIONS = ("basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature",
                    "authorityKeyIdentifier=keyid,issuer", "subjectKeyIdentifier=hash")


def make_ca(layout: Layout) -> None:
    addext = [arg for ext in _CA_EXTENSIONS for arg in ("-addext", ext)]
    _openssl("req", "-x509", *_EC, "-days", _DAYS, "-subj", "/CN=attested-cortex-local-ca",
             *addext, "-keyout", str(layout.key(CA)), "-out", str(layout.cert(CA)))


def _signed(layout: Layout, *, name: str, subject: str, extensions: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        csr, ext = Path(scratch, "req.csr"), Path(scratch, "ext.cnf")
        ext.write_text(extensions + "".join(f"{line}\n" for line in _LEAF_EXTENSIONS))
        _openssl("req", "-new", *_EC, "-subj", subject,
                 "-keyout", str(layout.key(name)), "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-days", _DAYS, "-extfile", str(ext),
                 "-CA", str(layout.cert(CA)), "-CAkey", str(layout.key(CA)),
                 "-CAcreateserial", "-out", str(layout.cert(name)))


def make_serving_cert(layout: Layout, *, name: str = APISERVER, subject: str = "/CN=kube-apiserver",
                      ips: tuple[str, ...] = ()) -> None:
    """A serving certificate for loopback, the ``kubernetes`` service names and ``ips``."""
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local"]
    addresses = dict.fromkeys([LOOPBACK, CLUSTER_SERVICE_IP, *ips])
    san = ",".join([*(f"IP:{ip}" for ip in addresses), *(f"DNS:{n}" for n in names)])
    _signed(layout, name=name, subject=subject,
            extensions=f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")


def make_client_cert(layout: Layout, identity: ClientIdentity) -> None:
    _signed(layout, name=identity.name, subject=identity.subject,
            extensions="extendedKeyUsage=clientAuth\n")


def make_service_account_keys(layout: Layout) -> None:
    key = layout.key(SERVICE_ACCOUNT)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(key))
    _openssl("pkey", "-in", str(key), "-pubout", "-out", str(layout.pki / "service-account.pub"))


def make_all(layout: Layout, identities: tuple[ClientIdentity, ...],
             ips: tuple[str, ...] = ()) -> None:
    """Everything the control plane needs; files land under ``layout.pki``."""
    layout.pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    make_ca(layout)
    make_serving_cert(layout, ips=ips)
    for identity in identities:
        make_client_cert(layout, identity)
    make_service_account_keys(layout)
    for key in layout.pki.glob("*.key"):
        key.chmod(0o600)
