"""``spec.federation`` as the server's ``federation`` settings, and the objects it needs: the
generated identity Secret, the client certificate (a Secret from the selfSigned CA, or a
cert-manager Certificate), the ConfigMap of the peers' CA bundles, and the pod's mounts.

The identity Secret holds an identity directory (``cortexctl identity`` files) whose agent
id is the cortex id; it is generated once by the controller (builders draw no randomness)
and, like the audit signer's key, owned by the Namespace as well, so a cortex made again
under the same name keeps the identity its peers were configured with. Pure.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from attested_cortex.builders import certificates, names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.crd.federation import FederationSpec

Object = dict[str, Any]

FEDERATION_DIR: Final = "/var/run/cortex/federation"
IDENTITY_DIR: Final = f"{FEDERATION_DIR}/identity"
CLIENT_DIR: Final = f"{FEDERATION_DIR}/tls"
PEERS_DIR: Final = f"{FEDERATION_DIR}/peers"
#: The identity directory's files (``attest.keyfiles``), as the agent key Secrets hold them.
KEY_FILES: Final = ("agent-id", "private.pem", "public.pem", "fingerprint")


def _secret(meta: Object, data: dict[str, str], type_: str) -> Object:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": type_, "metadata": meta,
            "data": encoded}


def spec_of(cortex: Cortex) -> FederationSpec | None:
    """``spec.federation``; None without it or without TLS (the CEL rule refuses that)."""
    spec = cortex.spec.federation
    return spec if spec is not None and cortex.spec.server.tls is not None else None


def cortex_id(cortex: Cortex) -> str:
    """The id peers know this cortex by: ``identity.id``, else the MemoryCortex's name."""
    spec = cortex.spec.federation
    return (spec.identity.id if spec is not None and spec.identity.id else None) \
        or cortex.meta.name


def client_secret(cortex: Cortex) -> str:
    """The Secret the client certificate is mounted from."""
    spec = spec_of(cortex)
    ref = spec.identity.client_secret_ref if spec is not None else None
    return ref.name if ref is not None else names.federation_tls_secret_name(cortex.meta.name)


def operator_issues(cortex: Cortex) -> bool:
    """Whether the operator makes the client certificate (selfSigned, no clientSecretRef)."""
    spec, tls = spec_of(cortex), cortex.spec.server.tls
    return (spec is not None and tls is not None and tls.self_signed is not None
            and spec.identity.client_secret_ref is None)


def federation_settings(cortex: Cortex) -> Object | None:
    """The ``federation`` section of ``config.yaml`` (None: not federated)."""
    spec = spec_of(cortex)
    if spec is None:
        return None
    return {
        "identity_dir": IDENTITY_DIR,
        "client_cert_file": f"{CLIENT_DIR}/{certificates.CERT_KEY}",
        "client_key_file": f"{CLIENT_DIR}/{certificates.KEY_KEY}",
        "peers": [{"name": p.name, "url": p.url, "ca_file": f"{PEERS_DIR}/{p.name}.crt",
                   "public_key": p.public_key, "send": list(p.send), "accept": list(p.accept),
                   "into": p.into, "trust_tier": p.trust_tier,
                   "scopes": None if p.scopes is None else list(p.scopes)}
                  for p in spec.peers]}


def build_identity_secret(cortex: Cortex, files: dict[str, str], *,
                          namespace_uid: str) -> Object:
    """The identity directory's files (``keyfiles.identity_files`` of a key whose agent id
    is :func:`cortex_id`)."""
    meta = names.metadata(names.federation_identity_secret_name(cortex.meta.name),
                          cortex.meta, component="server")
    meta["ownerReferences"].append(names.namespace_owner(cortex.meta.namespace, namespace_uid))
    return _secret(meta, files, "Opaque")


def build_client_secret(cortex: Cortex, *, cert_pem: str, key_pem: str, ca_pem: str) -> Object:
    """The selfSigned client certificate (common name: the cortex id)."""
    meta = names.metadata(names.federation_tls_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    return _secret(meta, {certificates.CERT_KEY: cert_pem, certificates.KEY_KEY: key_pem,
                          certificates.CA_KEY: ca_pem}, "kubernetes.io/tls")


def build_client_certificate(cortex: Cortex) -> Object:
    """The cert-manager Certificate of the client certificate (certManager TLS)."""
    tls = cortex.spec.server.tls
    if tls is None or tls.cert_manager is None:
        raise ValueError(f"cortex {cortex.meta.name} does not ask for cert-manager")
    issuer = tls.cert_manager.issuer_ref
    name = names.federation_tls_secret_name(cortex.meta.name)
    return {"apiVersion": certificates.CERT_MANAGER, "kind": "Certificate",
            "metadata": names.metadata(name, cortex.meta, component="server"),
            "spec": {"secretName": name, "commonName": cortex_id(cortex),
                     "dnsNames": [cortex_id(cortex)],
                     "usages": ["client auth", "digital signature"],
                     "privateKey": {"algorithm": "ECDSA", "size": 256,
                                    "rotationPolicy": "Always"},
                     "secretTemplate": {"labels": names.labels(cortex.meta.name, "server")},
                     "issuerRef": {"name": issuer.name, "kind": issuer.kind,
                                   "group": issuer.group}}}


def build_peers_config_map(cortex: Cortex) -> Object | None:
    """Each peer's CA bundle as ``<peer>.crt`` (None: not federated)."""
    spec = spec_of(cortex)
    if spec is None:
        return None
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": names.metadata(names.federation_peers_name(cortex.meta.name),
                                       cortex.meta, component="server"),
            "data": {f"{p.name}.crt": p.ca_bundle for p in spec.peers}}


def volumes(cortex: Cortex) -> tuple[list[Object], list[Object]]:
    """The identity, the client certificate and the peers' bundles, read-only."""
    if spec_of(cortex) is None:
        return [], []
    volumes: list[Object] = [
        {"name": "federation-identity", "secret": {
            "secretName": names.federation_identity_secret_name(cortex.meta.name),
            "defaultMode": 0o440, "items": [{"key": f, "path": f} for f in KEY_FILES]}},
        {"name": "federation-tls", "secret": {"secretName": client_secret(cortex),
                                               "defaultMode": 0o440}},
        {"name": "federation-peers", "configMap": {
            "name": names.federation_peers_name(cortex.meta.name)}}]
    mounts: list[Object] = [
        {"name": "federation-identity", "readOnly": True, "mountPath": IDENTITY_DIR},
        {"name": "federation-tls", "readOnly": True, "mountPath": CLIENT_DIR},
        {"name": "federation-peers", "readOnly": True, "mountPath": PEERS_DIR}]
    return volumes, mounts
