"""Authentication methods: who is calling. Siblings; the app picks one at start-up.

* ``dev`` trusts the ``X-Agent-Id`` header. It is refused unless every listen address is
  loopback (checked by :func:`check_dev_listen`), so it can never face a network.
* ``tokens`` reads a file of SHA-256 token hashes mapped to agent ids (one
  ``<sha256-hex> <agent-id>`` per line, ``#`` comments). Tokens are compared as hashes with
  :func:`hmac.compare_digest` against every entry, so timing reveals nothing.
* ``kubernetes`` (:mod:`.auth_kubernetes`) asks the API server (TokenReview) who a
  service-account token belongs to.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from attested_cortex.errors import InvalidInputError, UnauthenticatedError
from attested_cortex.service.context import Caller
from attested_cortex.types import AgentId

AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/\-]{0,199}$")
_HASH_LINE = re.compile(r"^([0-9a-f]{64})\s+(\S+)$")


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
    if not AGENT_ID.match(value):
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
        return Caller(parse_agent_id(value), self.mode)


@dataclass(frozen=True)
class TokenAuth:
    """Bearer tokens checked against a file of their SHA-256 hashes."""

    entries: tuple[tuple[bytes, AgentId], ...]
    mode: str = "tokens"

    @classmethod
    def from_file(cls, path: Path) -> TokenAuth:
        """Load ``<sha256-hex> <agent-id>`` lines; a malformed line is an error naming it."""
        entries: list[tuple[bytes, AgentId]] = []
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = _HASH_LINE.match(line)
            if not match or not AGENT_ID.match(match[2]):
                raise InvalidInputError(
                    f"{path}:{number}: expected '<sha256 hex of the token> <agent-id>'",
                    field="tokens_file",
                )
            entries.append((bytes.fromhex(match[1]), AgentId(match[2])))
        return cls(tuple(entries))

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        digest = hashlib.sha256(bearer_token(headers).encode()).digest()
        found: AgentId | None = None
        for known, agent in self.entries:
            if hmac.compare_digest(known, digest):
                found = agent
        if found is None:
            raise UnauthenticatedError("the bearer token is not recognised")
        return Caller(found, self.mode)


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
