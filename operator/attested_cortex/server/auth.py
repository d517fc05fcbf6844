"""Authentication methods: who is calling. Siblings; the app picks one at start-up.

* ``dev`` trusts the ``X-Agent-Id`` header. It is refused unless every listen address is
  loopback (checked by :func:`check_dev_listen`), so it can never face a network.
* ``tokens`` reads a file of SHA-256 token hashes mapped to agent ids and scopes (one
  ``<sha256-hex> <agent-id> [scope,scope,...] [tier=<trust tier>]`` per line, ``#``
  comments; no scopes: every scope but ``memory.override``; no tier: the configured
  default). Tokens come from ``cortexctl tokens generate`` (:mod:`.tokens`); a hash
  without the generator's mark, i.e. a hand-chosen token, is refused when the file is
  loaded. Tokens are compared as hashes with :func:`hmac.compare_digest` against every
  entry, so timing reveals nothing.
* ``kubernetes`` (:mod:`.auth_kubernetes`) asks the API server (TokenReview) who a
  service-account token belongs to.

Every method says the credential's trust tier; :func:`confine` (the auth middleware, right
after authentication) caps the scopes by the tier's ceiling (ADR 0049).
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from attested_cortex.errors import InvalidInputError, UnauthenticatedError
from attested_cortex.policy.scopes import DEFAULT, ScopeSet, attenuate
from attested_cortex.policy.tiers import (
    CALLER_TIERS,
    DEFAULT_TIER,
    Ceilings,
    TrustTier,
    lower,
    parse_tier,
    refuse_kernel,
)
from attested_cortex.server import tokens
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.types import AgentId

AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/\-]{0,199}")
_HASH_LINE = re.compile(r"([0-9a-f]{64})\s+(\S+)(?:\s+(?!tier=)(\S+))?(?:\s+tier=(\S+))?")


class Authenticator(Protocol):
    """Turns request headers into a :class:`Caller` or raises UnauthenticatedError."""

    @property
    def mode(self) -> str: ...

    async def authenticate(self, headers: Mapping[str, str]) -> Caller: ...


def bearer_token(headers: Mapping[str, str]) -> str:
    """The token of an ``Authorization: Bearer`` header (401 when there is none)."""
    scheme, _, token = headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthenticatedError("send 'Authorization: Bearer <token>'")
    return token.strip()


def parse_agent_id(value: str) -> AgentId:
    """Validate an agent id (letters, digits and ``_ . : @ / -``, at most 200 characters)."""
    if not AGENT_ID.fullmatch(value):
        raise UnauthenticatedError("the agent id is not valid", code="bad_agent_id")
    return AgentId(value)


@dataclass(frozen=True)
class DevAuth:
    """Development mode: the caller says who it is in ``X-Agent-Id``."""

    mode: str = "dev"
    tier: TrustTier = DEFAULT_TIER

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        value = headers.get("X-Agent-Id")
        if not value:
            raise UnauthenticatedError("send the X-Agent-Id header (dev authentication)")
        return Caller(parse_agent_id(value), self.mode, DEFAULT, tier=self.tier)


SCOPES_HEADER = "X-Cortex-Scopes"
TIER_HEADER = "X-Cortex-Trust-Tier"


def confine(caller: Caller, ceilings: Ceilings, headers: Mapping[str, str]) -> Caller:
    """The caller with its effective scopes (the credential's, narrowed by
    ``X-Cortex-Scopes``, ∩ its tier's ceiling): computed once per request, before anything
    else reads it. Kernel is refused; ``X-Cortex-Trust-Tier`` may only lower the
    credential's tier (403 above it). Done here, after authentication, rather than in each
    authenticator: a refusal then knows whom it refuses, and the middleware records it in
    the audit chain (issue 40)."""
    refuse_kernel(caller.tier, caller.agent_id)
    caller = dataclasses.replace(caller, scopes=narrowed(caller.scopes, headers))
    requested = headers.get(TIER_HEADER)
    tier = caller.tier if requested is None else lower(caller.tier, requested.strip())
    ceiling = ceilings[tier]
    return dataclasses.replace(caller, tier=tier, held=caller.scopes, ceiling=ceiling,
                               scopes=ceiling.confine(caller.scopes))


def narrowed(held: ScopeSet, headers: Mapping[str, str]) -> ScopeSet:
    """The scopes of one request: ``held``, or the narrower set a caller delegating to a
    sub-agent names in ``X-Cortex-Scopes`` (space- or comma-separated; wider is 403)."""
    raw = headers.get(SCOPES_HEADER)
    if raw is None:
        return held
    try:
        requested = ScopeSet.parse(t for t in raw.replace(",", " ").split() if t)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{SCOPES_HEADER}: {exc.message}", field=SCOPES_HEADER) from exc
    return attenuate(held, requested)


@dataclass(frozen=True)
class TokenAuth:
    """Bearer tokens checked against a file of their SHA-256 hashes."""

    entries: tuple[tuple[bytes, AgentId, ScopeSet, TrustTier], ...]
    mode: str = "tokens"

    @classmethod
    def from_file(cls, path: Path, *, default_tier: TrustTier = DEFAULT_TIER) -> TokenAuth:
        """Load ``<sha256-hex> <agent-id> [scopes] [tier=T]`` lines; a malformed line, an
        unknown scope or tier, or a hand-chosen token's hash is an error naming the line."""
        entries: list[tuple[bytes, AgentId, ScopeSet, TrustTier]] = []
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = _HASH_LINE.fullmatch(line)
            where = f"{path}:{number}"
            if not match or not AGENT_ID.fullmatch(match[2]):
                raise InvalidInputError(
                    f"{where}: expected '<sha256 hex of the token> <agent-id> [scopes]'",
                    field="tokens_file",
                )
            hashed = bytes.fromhex(match[1])
            if not tokens.marked(hashed):
                raise InvalidInputError(
                    f"{where}: this hash is not of a token from 'cortexctl tokens generate' "
                    "(hand-chosen tokens are too weak); generate one", field="tokens_file")
            try:
                scopes = ScopeSet.parse(match[3].split(",")) if match[3] else DEFAULT
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}: {exc.message}", field="tokens_file") from exc
            if match[4] is not None and match[4] not in CALLER_TIERS:
                raise InvalidInputError(f"{where}: tier must be one of "
                                        f"{', '.join(CALLER_TIERS)}", field="tokens_file")
            tier = parse_tier(match[4]) if match[4] is not None else default_tier
            entries.append((hashed, AgentId(match[2]), scopes, tier))
        return cls(tuple(entries))

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        token = bearer_token(headers)
        digest = tokens.digest(token)
        found: tuple[AgentId, ScopeSet, TrustTier] | None = None
        for known, agent, scopes, tier in self.entries:
            if hmac.compare_digest(known, digest):
                found = (agent, scopes, tier)
        if found is None or not tokens.well_formed(token):
            raise UnauthenticatedError("the bearer token is not recognised")
        return Caller(found[0], self.mode, found[1], tier=found[2])


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_dev_listen(hosts: Iterable[str]) -> None:
    """Refuse dev authentication on any address other people could reach."""
    exposed = [h for h in hosts if not is_loopback(h)]
    if exposed:
        raise InvalidInputError(
            f"--auth dev trusts X-Agent-Id and is only allowed on loopback; "
            f"not on {', '.join(exposed)}. Use --auth tokens or listen on 127.0.0.1",
            field="listen",
        )
