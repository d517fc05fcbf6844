"""Federation's server side: the :class:`Federation` a server runs with, built from its
settings, the mTLS client that fetches the peers' published keyrings, and who a connection's
client certificate says the caller is. Called by :mod:`.serving` (and tests) and by the
``/v1/federation`` routes.

A peer is known by its client certificate: one that a CA of *that peer's* ``ca_file``
issued, for client authentication, whose common name is the peer's name. The TLS handshake
already refused certificates no configured CA issued (:mod:`.tls`); here a certificate of
one peer presented as another is refused (docs/adr/0121).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp

from attested_cortex import pki
from attested_cortex.attest.keyfiles import read_identity
from attested_cortex.attest.keys import public_from_b64
from attested_cortex.errors import DeniedError, NotReadyError, UnauthenticatedError
from attested_cortex.policy.scopes import ScopeSet
from attested_cortex.server.auth import confine
from attested_cortex.server.settings import FederationSettings, PeerSettings
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources.federation_state import (
    PEER_AGENT_PREFIX,
    Federation,
    Peer,
    PeerKeyrings,
    ReplayCache,
    accept_patterns,
)
from attested_cortex.types import AgentId

#: The header naming the sending peer (its certificate must be that peer's).
PEER_HEADER = "X-Cortex-Peer"


def client_tls(settings: FederationSettings, peer: PeerSettings) -> ssl.SSLContext:
    """A context that verifies ``peer``'s server with its CA and presents our client
    certificate (the outbound side uses it too)."""
    context = pki.client_context(peer.ca_file)
    context.load_cert_chain(settings.client_cert_file, settings.client_key_file)
    return context


def federation_from(settings: FederationSettings, svc: Services) -> Federation:
    """The running federation state; an unreadable identity stops start-up."""
    by_name = {p.name: p for p in settings.peers}
    contexts = {p.name: client_tls(settings, p) for p in settings.peers}

    async def fetch(peer: Peer) -> Mapping[str, Any]:
        timeout = aiohttp.ClientTimeout(total=10)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, session.get(
                    f"{peer.url.rstrip('/')}/v1/federation/keyring",
                    ssl=contexts[peer.name]) as answer:
                answer.raise_for_status()
                document: Mapping[str, Any] = await answer.json()
                return document
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise NotReadyError(f"the keyring of peer {peer.name} cannot be fetched: {exc}",
                                code="peer_keyring_unavailable") from exc

    peers = {p.name: _peer(p, svc) for p in by_name.values()}
    return Federation(
        identity=read_identity(settings.identity_dir), peers=peers,
        keyrings=PeerKeyrings(fetch, ttl_s=settings.keyring_ttl_seconds),
        replay=ReplayCache(entries=settings.replay_entries,
                           ttl_s=settings.replay_ttl_seconds),
        max_changes=settings.max_changes_per_batch)


def default_scopes(into: str | None) -> list[str]:
    """A peer's scopes when its settings name none: it reads, writes and deletes only under
    its ``into`` prefix (qualified scopes pass the SemiTrusted ceiling's ``memory.forget``)."""
    bases = ("memory.read", "memory.write", "memory.forget")
    return [f"{b}:{into}/**" for b in bases] if into is not None else list(bases)


def _peer(settings: PeerSettings, svc: Services) -> Peer:
    scopes = settings.scopes if settings.scopes is not None else default_scopes(settings.into)
    caller = Caller(AgentId(f"{PEER_AGENT_PREFIX}{settings.name}"), "federation",
                    ScopeSet.parse(scopes),
                    tier=settings.trust_tier)
    return Peer(name=settings.name, url=settings.url,
                public_key=public_from_b64(settings.public_key),
                accept=accept_patterns(settings.accept), into=settings.into,
                caller=confine(caller, svc.policy.ceilings, {}))


def authenticate_peer(fed: Federation, bundles: Mapping[str, str], name: str | None,
                      cert_der: bytes | None) -> Peer:
    """The peer ``name`` when ``cert_der`` is its client certificate; 401 without a
    certificate, 403 for one that is not that peer's."""
    if cert_der is None:
        raise UnauthenticatedError("federation needs the peer's TLS client certificate",
                                   code="peer_certificate_required")
    peer = fed.peers.get(name or "")
    if peer is None or pki.client_name(cert_der, bundles[peer.name]) != peer.name:
        raise DeniedError("the client certificate is not that of the peer named in "
                          f"{PEER_HEADER}", code="wrong_peer")
    return peer


def bundles_of(settings: FederationSettings) -> dict[str, str]:
    """Each peer's CA bundle text, read once at start-up."""
    return {p.name: p.ca_file.read_text(encoding="utf-8") for p in settings.peers}
