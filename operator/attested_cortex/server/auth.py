"""Authentication methods: who is calling. Siblings; the app picks one at start-up.

* ``dev`` trusts the ``X-Agent-Id`` header. It is refused unless every listen address is
  loopback (checked by :func:`check_dev_listen`), so it can never face a network.
* ``tokens`` reads a file of SHA-256 token hashes mapped to agent ids and scopes (one
  ``<sha256-hex> <agent-id> [scope,scope,...]`` per line, ``#`` comments; no scopes: every
  scope but ``memory.override``). Tokens come from ``cortexctl tokens generate``
  (:mod:`.tokens`); a hash without the generator's mark, i.e. a hand-chosen token, is
  refused when the file is loaded. Tokens are compared as hashes with
  :func:`hmac.compare_digest` against every entry, so timing reveals nothing.
* ``kubernetes`` (:mod:`.auth_kubernetes`) asks the API server (TokenReview) who a
  service-account token belongs to.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from attested_cortex.errors import InvalidInputError, UnauthenticatedError
from attested_cortex.policy.scopes import DEFAULT, ScopeSet, attenuate
from attested_cortex.server import tokens
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.types import AgentId

AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/\-]{0,199}")
_HASH_LINE = re.compile(r"([0-9a-f]{64})\s+(\S+)(?:\s+(\S+))?")


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

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        value = headers.get("X-Agent-Id")
        if not value:
            raise UnauthenticatedError("send the X-Agent-Id header (dev authentication)")
        return Caller(parse_agent_id(value), self.mode, narrowed(DEFAULT, headers))


SCOPES_HEADER = "X-Cortex-Scopes"


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

    entries: tuple[tuple[bytes, AgentId, ScopeSet], ...]
    mode: str = "tokens"

    @classmethod
    def from_file(cls, path: Path) -> TokenAuth:
        """Load ``<sha256-hex> <agent-id> [scopes]`` lines; a malformed line, an unknown
        scope or a hand-chosen token's hash is an error naming the line."""
        entries: list[tuple[bytes, AgentId, ScopeSet]] = []
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
            entries.append((hashed, AgentId(match[2]), scopes))
        return cls(tuple(entries))

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        token = bearer_token(headers)
        digest = tokens.digest(token)
        found: tuple[AgentId, ScopeSet] | None = None
        for known, agent, scopes in self.entries:
            if hmac.compare_digest(known, digest):
                found = (agent, scopes)
        if found is None or not tokens.well_formed(token):
            raise UnauthenticatedError("the bearer token is not recognised")
        return Caller(found[0], self.mode, narrowed(found[1], headers))


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
