"""``spec.server.tls`` of a MemoryCortex: who makes the server's certificate (ADR 0047).

Exactly one of ``selfSigned`` (the operator's own CA and leaf, renewed at 2/3 of its life),
``secretRef`` (a ``kubernetes.io/tls`` Secret the user keeps current) or ``certManager``
(a cert-manager ``Certificate`` for the Service names); the CEL rule says so at admission.
Read by ``builders/certificates.py`` and ``builders/deployments.py``. Pure data.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, JsonValue

from attested_cortex.crd.common import CrdModel

IssuerKind = Literal["Issuer", "ClusterIssuer"]
TlsVersion = Literal["1.2", "1.3"]

TLS_RULES: Final[list[JsonValue]] = [{
    "rule": "[has(self.selfSigned), has(self.secretRef), has(self.certManager)]"
            ".filter(x, x).size() == 1",
    "message": "set exactly one of server.tls.selfSigned, server.tls.secretRef or "
               "server.tls.certManager",
}]


class SelfSignedTls(CrdModel):
    """The operator makes a CA and a server certificate (no options yet: ``{}``)."""


class TlsSecretReference(CrdModel):
    """A ``kubernetes.io/tls`` Secret in the cortex's namespace."""

    name: str = Field(
        description="Name of the Secret: tls.crt (the certificate, then its chain) and "
        "tls.key; ca.crt, when present, is what the hook sidecars verify the server with. "
        "A renewed Secret is served without a restart.",
        min_length=1, max_length=253)


class IssuerReference(CrdModel):
    """The cert-manager issuer that signs the server's certificate."""

    name: str = Field(description="Name of the Issuer or ClusterIssuer.", min_length=1,
                      max_length=253)
    kind: IssuerKind = Field(default="Issuer",
                             description="Issuer (in the cortex's namespace) or ClusterIssuer.")
    group: str = Field(default="cert-manager.io", max_length=253,
                       description="API group of the issuer (external issuers have their own).")


class CertManagerTls(CrdModel):
    """A cert-manager Certificate for the server's Service names (cert-manager must be
    installed; without it ServerReady says CertManagerMissing)."""

    issuer_ref: IssuerReference = Field(description="The issuer that signs the certificate.")


class ServerTlsSpec(CrdModel):
    """HTTPS for the memory server: exactly one of selfSigned, secretRef or certManager."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": TLS_RULES})

    self_signed: SelfSignedTls | None = Field(
        default=None,
        description="The operator creates a CA (Secret <cortex>-tls-ca) and a server "
        "certificate for the Service names (Secret <cortex>-tls), renews the certificate "
        "at 2/3 of its 90-day life with an Event, and publishes the CA in the ConfigMap "
        "<cortex>-ca (key ca.crt) for clients.")
    secret_ref: TlsSecretReference | None = Field(
        default=None, description="Bring your own certificate in a kubernetes.io/tls Secret.")
    cert_manager: CertManagerTls | None = Field(
        default=None,
        description="cert-manager issues the certificate into Secret <cortex>-tls and renews "
        "it.")
    min_version: TlsVersion = Field(
        default="1.2", description="Oldest TLS version the server accepts: 1.2 or 1.3.")
