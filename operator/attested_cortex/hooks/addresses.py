"""Socket addresses of remote hook daemons: ``tcp://HOST:PORT`` and ``unix:///path``.

Parsed by the settings loader (validation), the remote transport (connecting) and
``cortexctl hookd`` (listening). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import urlsplit


@dataclass(frozen=True)
class TcpAddress:
    """A TCP endpoint."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


@dataclass(frozen=True)
class UnixAddress:
    """A Unix domain socket path."""

    path: str

    def __str__(self) -> str:
        return f"unix://{self.path}"


Address: TypeAlias = TcpAddress | UnixAddress


def parse_address(text: str) -> Address:
    """Parse ``tcp://HOST:PORT`` or ``unix:///abs/path``; ``ValueError`` says what is wrong."""
    parts = urlsplit(text)
    if parts.scheme == "unix":
        path = parts.netloc + parts.path
        if not path.startswith("/"):
            raise ValueError(f"{text!r}: a unix address needs an absolute path (unix:///path)")
        return UnixAddress(path=path)
    if parts.scheme == "tcp":
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{text!r}: bad port") from exc
        if not parts.hostname or port is None or parts.path not in ("", "/"):
            raise ValueError(f"{text!r}: a tcp address is tcp://HOST:PORT")
        try:  # what the resolver will do: an empty or 64+ character label cannot be looked up
            parts.hostname.encode("idna")
        except UnicodeError as exc:
            raise ValueError(f"{text!r}: bad host name ({exc})") from exc
        return TcpAddress(host=parts.hostname, port=port)
    raise ValueError(f"{text!r}: the address must start with tcp:// or unix://")
