"""A minimal HTTPS client for the local API server, authenticated with a client certificate.

Callers: controlplane.py (health checks, creating the kwok node, readiness conditions).
Standard library only; the tests themselves use kubectl through tests/support/kube.py.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from .layouts import Layout
from .pki import CA

TIMEOUT_S = 5.0


class ApiUnavailableError(Exception):
    """The API server did not answer (yet); the caller may retry."""


@dataclass(frozen=True)
class Api:
    """Requests to ``server`` as the identity whose certificate files are named ``user``."""

    server: str
    layout: Layout
    user: str
    _context: ssl.SSLContext = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        context = ssl.create_default_context(cafile=str(self.layout.cert(CA)))
        context.load_cert_chain(str(self.layout.cert(self.user)), str(self.layout.key(self.user)))
        object.__setattr__(self, "_context", context)

    def request(self, path: str, *, method: str = "GET", body: object = None) -> object:
        """The decoded JSON (or text) answer; None for 404; raises ApiUnavailableError."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(  # noqa: S310 - https URL of our own API server
            self.server + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=self._context) as resp:  # noqa: S310
                text = resp.read().decode()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise ApiUnavailableError(f"{method} {path}: HTTP {error.code}") from error
        except (urllib.error.URLError, OSError) as error:
            raise ApiUnavailableError(f"{method} {path}: {error}") from error
        return json.loads(text) if text.startswith("{") else text
