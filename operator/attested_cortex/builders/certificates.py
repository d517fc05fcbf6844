"""The server's TLS objects (ADR 0047): the selfSigned CA and leaf Secrets, the CA bundle
ConfigMap, a cert-manager Certificate, and where the pod finds its certificate.

Which Secret the server mounts: ``<cortex>-tls`` for selfSigned (the operator's) and
certManager (cert-manager writes it), the user's for secretRef. The names a certificate must
selfSigned CA Secret holds the CA that signs the leaf (``tls.crt``/``tls.key``) and, while
it is renewed (``pki.ca_rotation``), its published successor (``next.crt``/``next.key``) or
the CA it replaced (``previous.crt``, no key: it signs nothing more), kept until it expires;
clients trust the bundle of all of them. The names a certificate must
carry are the Service's DNS names, ``localhost`` and ``127.0.0.1`` (the hook sidecars call
the server of their own pod). Certificates and keys come from the controller (builders draw
no randomness); the Secrets are created once and a leaf is replaced only when it is renewed.
Pure.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.crd.tls import ServerTlsSpec

Object = dict[str, Any]

CERT_MANAGER: Final = "cert-manager.io/v1"
TLS_DIR: Final = "/var/run/cortex/tls"
#: Only ``ca.crt`` of the server's Secret, for the hook sidecars (never the server's key).
TLS_CA_DIR: Final = "/var/run/cortex/tls-ca"
CERT_KEY: Final = "tls.crt"
KEY_KEY: Final = "tls.key"
CA_KEY: Final = "ca.crt"
NEXT_CERT_KEY: Final = "next.crt"
NEXT_KEY_KEY: Final = "next.key"
PREVIOUS_CERT_KEY: Final = "previous.crt"
LOOPBACK_NAMES: Final = ("localhost",)
LOOPBACK_IPS: Final = ("127.0.0.1",)


def tls_of(cortex: Cortex) -> ServerTlsSpec | None:
    """``spec.server.tls`` (None: plain HTTP)."""
    return cortex.spec.server.tls


def server_secret(cortex: Cortex) -> str | None:
    """The Secret the server's certificate is mounted from, or None without TLS."""
    tls = tls_of(cortex)
    if tls is None:
        return None
    return tls.secret_ref.name if tls.secret_ref is not None else names.tls_secret_name(
        cortex.meta.name)


def dns_names(cortex: Cortex) -> list[str]:
    """The Service's names, shortest first, then ``localhost``."""
    service, namespace = names.service_name(cortex.meta.name), cortex.meta.namespace
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local", *LOOPBACK_NAMES]


def _tls_secret(meta: Object, data: dict[str, str]) -> Object:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": meta, "data": encoded}


def build_ca_secret(cortex: Cortex, *, cert_pem: str, key_pem: str,
                    successor: tuple[str, str] | None = None,
                    previous_pem: str | None = None) -> Object:
    """The selfSigned CA's certificate and key; during a renewal its successor (certificate,
    key) or the certificate of the CA it replaced."""
    meta = names.metadata(names.tls_ca_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    data = {CERT_KEY: cert_pem, KEY_KEY: key_pem}
    if successor is not None:
        data |= {NEXT_CERT_KEY: successor[0], NEXT_KEY_KEY: successor[1]}
    if previous_pem is not None:
        data[PREVIOUS_CERT_KEY] = previous_pem
    return _tls_secret(meta, data)


def ca_bundle(*cert_pems: str | None) -> str:
    """The PEM bundle clients trust: the signing CA first, then its successor or the CA it
    replaced (absent ones skipped)."""
    return "".join(p if p.endswith("\n") else p + "\n" for p in cert_pems if p)


def build_leaf_secret(cortex: Cortex, *, cert_pem: str, key_pem: str, ca_pem: str) -> Object:
    """The server's certificate and key, with the CA that signed it (as cert-manager
    writes it)."""
    meta = names.metadata(names.tls_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    return _tls_secret(meta, {CERT_KEY: cert_pem, KEY_KEY: key_pem, CA_KEY: ca_pem})


def build_ca_bundle(cortex: Cortex, ca_pem: str) -> Object:
    """The CA clients verify the server with, public (``kubectl get cm <cortex>-ca``):
    one CA, or during a renewal the bundle of :func:`ca_bundle`."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": names.metadata(names.ca_bundle_name(cortex.meta.name), cortex.meta,
                                       component="server"),
            "data": {CA_KEY: ca_pem}}


def build_certificate(cortex: Cortex) -> Object:
    """The cert-manager Certificate of a certManager cortex (its issuer signs, cert-manager
    renews at 2/3 of the life by default and rotates the key each time)."""
    tls = tls_of(cortex)
    if tls is None or tls.cert_manager is None:
        raise ValueError(f"cortex {cortex.meta.name} does not ask for cert-manager")
    issuer = tls.cert_manager.issuer_ref
    name = names.tls_secret_name(cortex.meta.name)
    return {"apiVersion": CERT_MANAGER, "kind": "Certificate",
            "metadata": names.metadata(name, cortex.meta, component="server"),
            "spec": {"secretName": name, "commonName": dns_names(cortex)[0],
                     "dnsNames": dns_names(cortex), "ipAddresses": list(LOOPBACK_IPS),
                     "usages": ["server auth", "digital signature"],
                     "privateKey": {"algorithm": "ECDSA", "size": 256,
                                    "rotationPolicy": "Always"},
                     "secretTemplate": {"labels": names.labels(cortex.meta.name, "server")},
                     "issuerRef": {"name": issuer.name, "kind": issuer.kind,
                                   "group": issuer.group}}}


def server_tls_settings(cortex: Cortex) -> Object | None:
    """The ``tls`` section of ``config.yaml``."""
    tls = tls_of(cortex)
    if tls is None:
        return None
    return {"cert_file": f"{TLS_DIR}/{CERT_KEY}", "key_file": f"{TLS_DIR}/{KEY_KEY}",
            "min_version": tls.min_version}


def volumes(cortex: Cortex) -> tuple[list[Object], list[Object], list[Object]]:
    """The server's certificate volume and mount, and the CA-only volume with the sidecars'
    mount (empty without TLS). The CA volume is optional: a bring-your-own Secret may have
    no ``ca.crt`` (then the sidecars verify with the system's roots)."""
    secret = server_secret(cortex)
    if secret is None:
        return [], [], []
    vols: list[Object] = [
        {"name": "tls", "secret": {"secretName": secret, "defaultMode": 0o440, "items": [
            {"key": CERT_KEY, "path": CERT_KEY}, {"key": KEY_KEY, "path": KEY_KEY}]}},
        {"name": "tls-ca", "secret": {"secretName": secret, "defaultMode": 0o444,
                                      "optional": True,
                                      "items": [{"key": CA_KEY, "path": CA_KEY}]}}]
    server_mounts: list[Object] = [{"name": "tls", "mountPath": TLS_DIR, "readOnly": True}]
    sidecar_mounts: list[Object] = [{"name": "tls-ca", "mountPath": TLS_CA_DIR,
                                     "readOnly": True}]
    return vols, server_mounts, sidecar_mounts
