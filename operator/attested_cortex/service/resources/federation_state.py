"""What inbound federation holds between requests: its peers, the replay cache and the peers'
published keyrings. Built once at start-up by the server's configuration
(:func:`attested_cortex.server.configuring.federation_from`); read by
:mod:`.federation`.

The replay cache is seed 000's K6 seen-LRU: 10k correlation ids for 30 s. It is memory only;
the durable per-peer high-water mark (``federation_peers``) covers a restart. A peer's keyring
is fetched with the injected :data:`KeyringFetch` (the HTTP client lives in the server layer),
trusted only once the peer's identity key signed it, and kept ``keyring_ttl_s``; a change
signed by a key the cached copy does not know fetches it again at once, at most once per
``refetch_s``, so a rotation at the peer is seen without waiting out the TTL. A keyring
that cannot be fetched or does not verify is :class:`NotReadyError` (503): the changes that
needed it are answered ``retry``, never refused or quarantined for the peer's outage.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.peer_changes import parse_keyring_document
from attested_cortex.errors import InvalidInputError, NotReadyError
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.service.pipeline.context import Caller

#: The agent id a peer's changes are written as here (``peer:<name>``): a memory whose
#: author has it was stored from a peer, even before its ``federation_objects`` row exists.
PEER_AGENT_PREFIX = "peer:"

@dataclass(frozen=True)
class Peer:
    """One configured peer, as the service sees it."""

    name: str
    url: str
    public_key: bytes
    accept: tuple[tuple[str, ...], ...]
    into: str | None
    #: The agent the peer acts as (``peer:<name>``) with its scopes and trust tier.
    caller: Caller

    def accepts(self, namespace: str) -> bool:
        """Whether a change in ``namespace`` (at the origin) is accepted at all."""
        return any(matches(p, namespace) for p in self.accept)

    def local(self, namespace: str) -> str:
        """Where an accepted change lands here."""
        return namespace if self.into is None else f"{self.into}/{namespace}"


def accept_patterns(patterns: list[str]) -> tuple[tuple[str, ...], ...]:
    """Parsed ``accept`` patterns (validated with the settings)."""
    return tuple(parse_pattern(p) for p in patterns)


class ReplayCache:
    """Correlation ids seen in the last ``ttl_s``, at most ``entries`` (oldest evicted)."""

    def __init__(self, *, entries: int, ttl_s: float) -> None:
        self._seen: OrderedDict[uuid.UUID, float] = OrderedDict()
        self._entries, self._ttl = entries, ttl_s

    def seen(self, correlation_id: uuid.UUID, now: float) -> bool:
        """Whether the id arrived within the TTL."""
        at = self._seen.get(correlation_id)
        return at is not None and now - at < self._ttl

    def add(self, correlation_id: uuid.UUID, now: float) -> None:
        """Remember the id; the oldest entry goes when the cache is full."""
        self._seen[correlation_id] = now
        self._seen.move_to_end(correlation_id)
        while len(self._seen) > self._entries:
            self._seen.popitem(last=False)

    def forget(self, correlation_id: uuid.UUID) -> None:
        """Drop an id whose change was not handled (the sender retries it)."""
        self._seen.pop(correlation_id, None)


KeyringFetch = Callable[[Peer], Awaitable[Mapping[str, Any]]]


@dataclass
class _Cached:
    keyring: Keyring
    fetched_at: float


class PeerKeyrings:
    """Each peer's verified keyring, fetched on first use and again after the TTL."""

    def __init__(self, fetch: KeyringFetch, *, ttl_s: float, refetch_s: float = 1.0) -> None:
        self._fetch, self._ttl, self._refetch = fetch, ttl_s, refetch_s
        self._cache: dict[str, _Cached] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, peer: Peer, *, fresh: bool = False) -> Keyring:
        """The peer's keyring; ``fresh``: fetched again unless it was just fetched."""
        async with self._locks.setdefault(peer.name, asyncio.Lock()):
            cached, now = self._cache.get(peer.name), time.monotonic()
            wait = self._refetch if fresh else self._ttl
            if cached is not None and now - cached.fetched_at < wait:
                return cached.keyring
            raw = await self._fetch(peer)
            try:
                keyring = parse_keyring_document(raw, cortex=peer.name,
                                                 public_key=peer.public_key)
            except InvalidInputError as exc:  # the peer must fix it; its changes wait
                raise NotReadyError(exc.message, code="bad_peer_keyring") from exc
            self._cache[peer.name] = _Cached(keyring, now)
            return keyring


@dataclass
class Federation:
    """This cortex's federation identity and inbound state."""

    identity: AgentKey
    peers: Mapping[str, Peer]
    keyrings: PeerKeyrings
    replay: ReplayCache
    max_changes: int = 500
    clock: Callable[[], float] = field(default=time.time)

    @property
    def cortex_id(self) -> str:
        """This cortex's id (its identity's agent id): the ``origin`` of its own changes."""
        return self.identity.agent_id
