"""Ed25519 key values and their PEM forms: the material an agent identity is made of.

Pure (no file or network I/O). Called by :mod:`~attested_cortex.attest.keyfiles` (the
on-disk format), :mod:`~attested_cortex.attest.signing`, the operator's key Secret builder
and ``cortexctl identity``.

PEM encodings are the standard ones, readable by OpenSSL:

* private key: PKCS#8 ``PRIVATE KEY`` (RFC 8410), a fixed 16-byte DER prefix + the 32-byte seed;
* public key: SubjectPublicKeyInfo ``PUBLIC KEY``, a fixed 12-byte DER prefix + the 32-byte key.

The fingerprint of a key is the lowercase hex SHA-256 of the raw 32-byte public key.
A private key's ``repr`` never shows the seed.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass, field

from nacl.signing import SigningKey, VerifyKey

from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId, Fingerprint

PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
KEY_BYTES = 32


@functools.lru_cache(maxsize=4096)
def fingerprint_of(public_key: bytes) -> Fingerprint:
    """SHA-256 (lowercase hex) of a raw public key. Cached: a chain verification asks it
    for the same few keys once per event."""
    return Fingerprint(hashlib.sha256(public_key).hexdigest())


@dataclass(frozen=True, slots=True)
class PublicIdentity:
    """An agent id bound to one raw Ed25519 public key."""

    agent_id: AgentId
    public_key: bytes

    @property
    def fingerprint(self) -> Fingerprint:
        """SHA-256 (hex) of the raw public key."""
        return fingerprint_of(self.public_key)

    @property
    def public_b64(self) -> str:
        """Standard base64 of the raw 32-byte public key (the form JSON documents carry)."""
        return base64.b64encode(self.public_key).decode("ascii")


@dataclass(frozen=True, slots=True)
class AgentKey:
    """An agent's private signing key. Holds secret material: never log or serialise it."""

    agent_id: AgentId
    signing_key: SigningKey = field(repr=False, compare=False)

    @property
    def public(self) -> PublicIdentity:
        """The public half, safe to publish."""
        return PublicIdentity(self.agent_id, bytes(self.signing_key.verify_key))


def generate_key(agent_id: AgentId) -> AgentKey:
    """A fresh random key for ``agent_id``."""
    return AgentKey(agent_id, SigningKey.generate())


def key_from_seed(agent_id: AgentId, seed: bytes) -> AgentKey:
    """Rebuild a key from its 32-byte seed."""
    if len(seed) != KEY_BYTES:
        raise InvalidInputError("an Ed25519 seed is 32 bytes", code="bad_key")
    return AgentKey(agent_id, SigningKey(seed))


def private_pem(key: AgentKey) -> str:
    """PKCS#8 PEM of the private key (secret: write it 0600, never print it)."""
    return _pem("PRIVATE KEY", PKCS8_PREFIX + bytes(key.signing_key))


def public_pem(public_key: bytes) -> str:
    """SubjectPublicKeyInfo PEM of a raw public key."""
    return _pem("PUBLIC KEY", SPKI_PREFIX + public_key)


def seed_from_pem(text: str) -> bytes:
    """The 32-byte seed inside a PKCS#8 Ed25519 PEM."""
    return _unpem(text, label="PRIVATE KEY", prefix=PKCS8_PREFIX)


def public_from_pem(text: str) -> bytes:
    """The raw 32-byte key inside a SubjectPublicKeyInfo Ed25519 PEM."""
    return _unpem(text, label="PUBLIC KEY", prefix=SPKI_PREFIX)


def public_from_b64(text: str) -> bytes:
    """Decode a standard-base64 raw public key, checking its length."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError("public key is not valid base64", code="bad_key") from exc
    if len(raw) != KEY_BYTES:
        raise InvalidInputError("an Ed25519 public key is 32 bytes", code="bad_key")
    VerifyKey(raw)
    return raw


def _pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode("ascii")
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def _unpem(text: str, *, label: str, prefix: bytes) -> bytes:
    lines = [line.strip() for line in text.strip().splitlines()]
    framed = lines[:1] == [f"-----BEGIN {label}-----"] and lines[-1:] == [f"-----END {label}-----"]
    if len(lines) < 3 or not framed:
        raise InvalidInputError(f"not a PEM {label}", code="bad_key")
    try:
        der = base64.b64decode("".join(lines[1:-1]), validate=True)
    except ValueError as exc:
        raise InvalidInputError(f"PEM {label} body is not base64", code="bad_key") from exc
    if len(der) != len(prefix) + KEY_BYTES or not der.startswith(prefix):
        raise InvalidInputError(f"PEM {label} is not an Ed25519 key", code="bad_key")
    return der[len(prefix) :]
