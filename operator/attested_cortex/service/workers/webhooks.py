"""One webhook attempt: sign, send, read a bounded answer (ADR 0107). Called by
:mod:`.delivering` only.

Signed with the Standard Webhooks scheme through its reference library (``standardwebhooks``):
``webhook-id`` (stable per event: retries and replays carry the same one, so receivers
deduplicate), ``webhook-timestamp`` and ``webhook-signature: v1,<base64 HMAC-SHA256>`` over
``id.timestamp.body`` with the subscription's ``whsec_`` secret. A :class:`Sender` is one
subscription's HTTP client: its connector holds at most ``max_in_flight`` connections (a
receiver that hangs holds its own slots, nobody else's), every attempt has connect and total
timeouts, redirects are not followed, at most ``max_response_bytes`` of an answer is read, and
every address a host resolves to passes the SSRF guard (:mod:`attested_cortex.policy.targets`)
before a connection is opened to it (an IP literal is checked before the request).
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from standardwebhooks import Webhook

from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.targets import Network, check_addresses, parse_target

#: The User-Agent of every delivery.
USER_AGENT = "attested-cortex-webhooks/1"


def new_secret() -> str:
    """A fresh Standard Webhooks secret (``whsec_`` and 32 random bytes in base64)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def check_secret(secret: str) -> str:
    """``secret`` if the library accepts it as a signing secret, else an input error."""
    try:
        Webhook(secret)
    except Exception as exc:  # the library raises its own and binascii errors
        raise InvalidInputError("secret must be a Standard Webhooks secret (whsec_ and "
                                "base64)", field="secret") from exc
    return secret


def signed_headers(secret: str, msg_id: str, body: str, at: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers of ``body``."""
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(msg_id, at, body)}


@dataclass(frozen=True)
class Limits:
    """The bounds of every attempt."""

    connect_timeout_s: float = 2.0
    total_timeout_s: float = 10.0
    max_response_bytes: int = 4096


class _GuardedResolver(AbstractResolver):
    """Resolves like aiohttp, then refuses the lot when any address is not allowed."""

    def __init__(self, *, allow_private: bool, refused: tuple[Network, ...]) -> None:
        self._inner = DefaultResolver()
        self._allow, self._refused = allow_private, refused

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        check_addresses(host, [r["host"] for r in found], allow_private=self._allow,
                        refused=self._refused)
        return found

    async def close(self) -> None:
        await self._inner.close()


class Sender:
    """One subscription's HTTP client."""

    def __init__(self, *, max_in_flight: int, allow_private: bool,
                 refused: tuple[Network, ...], limits: Limits) -> None:
        self._allow, self._refused, self._limits = allow_private, refused, limits
        connector = aiohttp.TCPConnector(
            limit=max_in_flight, resolver=_GuardedResolver(allow_private=allow_private,
                                                           refused=refused))
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(
                total=limits.total_timeout_s, sock_connect=limits.connect_timeout_s,
                connect=limits.connect_timeout_s))

    async def close(self) -> None:
        await self._session.close()

    async def send(self, url: str, *, secret: str, msg_id: str, body: str) -> str | None:
        """One attempt: None when the receiver answered 2xx, else why not (for the log,
        the state and the dead letter; never a secret)."""
        host, _ = parse_target(url)
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:  # aiohttp connects to a literal without resolving it
            check_addresses(host, [str(literal)], allow_private=self._allow,
                            refused=self._refused)
        headers = {"content-type": "application/json", "user-agent": USER_AGENT,
                   **signed_headers(secret, msg_id, body, datetime.now(UTC))}
        try:
            async with self._session.post(url, data=body.encode(), headers=headers,
                                          allow_redirects=False) as resp:
                await resp.content.read(self._limits.max_response_bytes)
                if 200 <= resp.status < 300:
                    return None
                return f"HTTP {resp.status}"
        except InvalidInputError as exc:
            return exc.message
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return _why(exc)


def _why(exc: BaseException) -> str:
    """A short, secret-free reason (the resolver's refusal comes wrapped)."""
    cause: Any = exc
    while cause is not None:
        if isinstance(cause, InvalidInputError):
            return cause.message
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
