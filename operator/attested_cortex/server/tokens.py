"""Bearer tokens for ``--auth tokens``: generated with 256 bits of entropy, stored as hashes.

A token is ``ctx_`` + 43 URL-safe base64 characters (32 random bytes). The tokens file holds
only ``sha256(token)``, so the server cannot see a token's length; instead
:func:`generate` draws tokens until the hash starts with :data:`MARK_BITS` zero bits, and
loading refuses a hash without that mark. A hand-chosen token (``hunter2``) has a 1 in 4096
chance of carrying it, and is refused anyway when presented, because it lacks the generated
shape. Neither check costs a generated token any entropy (the mark selects among random
tokens; it reveals nothing about one). Called by ``cortexctl tokens generate`` and
:class:`~.auth.TokenAuth`.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Final

PREFIX: Final = "ctx_"
MARK_BITS: Final = 12
SHAPE: Final = re.compile(r"ctx_[A-Za-z0-9_-]{43}")


def digest(token: str) -> bytes:
    """SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).digest()


def marked(hashed: bytes) -> bool:
    """Whether a stored hash carries the generator's mark."""
    return int.from_bytes(hashed[:2], "big") >> (16 - MARK_BITS) == 0


def generate() -> tuple[str, str]:
    """A new token and the hex hash to put in the tokens file."""
    while True:
        token = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        hashed = digest(token)
        if marked(hashed):
            return token, hashed.hex()


def well_formed(token: str) -> bool:
    """Whether a presented token has the generated shape (hand-chosen ones do not)."""
    return SHAPE.fullmatch(token) is not None
