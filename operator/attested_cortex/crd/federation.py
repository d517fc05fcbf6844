"""``spec.federation`` of a MemoryCortex (issue 42, docs/federation.md, docs/adr/0121).

The cortex's own peer identity (an Ed25519 key the operator generates into Secret
``<cortex>-federation-identity``, and a TLS client certificate issued the way the server's
is: from the selfSigned CA, by cert-manager, or the user's Secret) and its ``peers``: how
each is reached and trusted, what is sent to it and accepted from it, and where accepted
changes land. Read by ``builders/federation.py``. Pure data.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, JsonValue

from attested_cortex.crd.common import CrdModel, section
from attested_cortex.crd.tls import TlsSecretReference

PATTERN_LENGTH: Final = 128
CORTEX_ID: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

#: Federation authenticates peers by client certificate: it needs HTTPS.
FEDERATION_RULES: Final[list[JsonValue]] = [{
    "rule": "!has(self.federation) || has(self.server.tls)",
    "message": "federation needs server.tls: peers authenticate by TLS client certificate",
}]

# A plain OpenAPI pattern, not the CEL rules of PermissionRule namespaces: nested in a list
# of peers, those CEL checks exceed the API server's cost budget; the server checks each
# pattern again at start-up.
NamespacePattern = Annotated[str, Field(
    min_length=1, max_length=PATTERN_LENGTH,
    pattern=r"^(\*\*|\*|[a-z0-9._-]+)(/(\*\*|\*|[a-z0-9._-]+))*$",
    description="Memory-namespace pattern: '/'-separated segments of [a-z0-9._-], '*' for one "
    "level and '**' for any depth, e.g. team/**.",
)]


class FederationIdentity(CrdModel):
    """Who this cortex is to its peers."""

    id: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=CORTEX_ID,
        description="The cortex id peers know this cortex by (its client certificate's "
        "common name and the origin of its changes); default: the MemoryCortex's name.")
    client_secret_ref: TlsSecretReference | None = Field(
        default=None,
        description="A kubernetes.io/tls Secret with this cortex's client certificate; "
        "needed with server.tls.secretRef, otherwise issued like the server's certificate "
        "(selfSigned CA or cert-manager) into Secret <cortex>-federation-tls.")


class FederationPeer(CrdModel):
    """One peer cortex."""

    name: str = Field(min_length=1, max_length=63, pattern=CORTEX_ID,
                      description="The peer's cortex id (its certificate's common name).")
    url: str = Field(min_length=8, max_length=2048, pattern=r"^https://",
                     description="The peer's server, e.g. https://cortex.team-b.example:8080.")
    ca_bundle: str = Field(
        min_length=1, max_length=65536,
        description="PEM of the CA(s) that issue the peer's server and client certificates.")
    public_key: str = Field(
        min_length=44, max_length=44,
        description="The peer's Ed25519 identity key (base64 of the raw 32 bytes, the "
        "Secret <peer>-federation-identity's public half): it signs the keyring the peer "
        "publishes, which its agents' signatures are verified with.")
    send: list[NamespacePattern] = Field(
        default_factory=list, max_length=32,
        description="Namespaces whose changes are sent to this peer (the outbound side).")
    accept: list[NamespacePattern] = Field(
        default_factory=list, max_length=32,
        description="Namespaces (at the peer) whose changes are accepted from it.")
    into: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=r"^[a-z0-9._-]+(/[a-z0-9._-]+)*$",
        description="Local namespace prefix accepted changes land under; default: none.")
    trust_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] = Field(
        default="SemiTrusted",
        description="The trust tier of the agent peer:<name> the peer's changes run as.")
    scopes: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None, max_length=32,
        description="The scopes of the agent peer:<name>; default: memory.read, memory.write "
        "and memory.forget, qualified by <into>/** when into is set (links need graph.write "
        "and a tier that grants it).")


class FederationSpec(CrdModel):
    """Federation with other cortexes: signed memories replicated over mTLS."""

    identity: FederationIdentity = section(FederationIdentity, "This cortex's peer identity.")
    peers: list[FederationPeer] = Field(default_factory=list, max_length=32,
                                        description="The peer cortexes.")
