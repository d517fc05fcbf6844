"""Ed25519 sign and verify over canonical payload bytes.

Pure. Called by :mod:`~attested_cortex.attest.levels` (deciding a write's attestation), by
:mod:`~attested_cortex.attest.auditing` (chain verification) and by the service layer when
it signs in Cortex custody. Verification never raises for a bad signature: it answers
``False``, and the caller decides what a mismatch means.
"""

from __future__ import annotations

import base64
import functools

from nacl.exceptions import BadSignatureError
from nacl.exceptions import ValueError as NaclValueError
from nacl.signing import VerifyKey

from attested_cortex.attest.keys import KEY_BYTES, AgentKey
from attested_cortex.errors import InvalidInputError

SIGNATURE_BYTES = 64


def sign(key: AgentKey, message: bytes) -> bytes:
    """The 64-byte detached Ed25519 signature of ``message``."""
    signature: bytes = key.signing_key.sign(message).signature
    return signature


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a valid Ed25519 signature of ``message`` by ``public_key``."""
    if len(public_key) != KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        _verify_key(public_key).verify(message, signature)
    except (BadSignatureError, NaclValueError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _verify_key(public_key: bytes) -> VerifyKey:
    """One VerifyKey per public key: a chain verification checks every event of an agent
    with the same key (libsodium's verify itself keeps no state, so sharing is safe)."""
    return VerifyKey(public_key)


def parse_signature(text: str) -> bytes:
    """Decode a signature as the HTTP API carries it: standard base64 of 64 bytes."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError("signature must be base64", field="signature") from exc
    if len(raw) != SIGNATURE_BYTES:
        raise InvalidInputError("signature must be 64 bytes", field="signature")
    return raw
