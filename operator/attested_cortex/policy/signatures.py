"""HMAC-signed approval decisions: the check of ``POST /v1/approvals/{id}``. Pure.

The approver signs ``"{timestamp}.{METHOD}.{path}.{body}"`` with the cortex's approval
secret (HMAC-SHA256) and sends ``X-Cortex-Timestamp: <unix seconds>`` and
``X-Cortex-Signature: sha256=<hex>``. A timestamp more than :data:`MAX_AGE_S` old or
:data:`MAX_SKEW_S` ahead, or a wrong signature, is refused; whether the signature was used
before (a replay) is the caller's check, against the database. Every refusal is the same
401 to the client; the reason is in the message.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from attested_cortex.errors import UnauthenticatedError

MAX_AGE_S: Final = 300
MAX_SKEW_S: Final = 60


def _unix_seconds(timestamp: str) -> bool:
    """Whether the header is 1-12 ASCII digits: ``str.isdigit`` alone also takes ``²``
    (which ``int`` refuses: a 500) and Arabic-Indic or fullwidth digits (which ``int``
    reads: a second spelling of one timestamp)."""
    return 0 < len(timestamp) <= 12 and timestamp.isascii() and timestamp.isdigit()


def sign(secret: bytes, *, timestamp: str, method: str, path: str, body: bytes) -> str:
    """The hex signature of one request (what an approver computes)."""
    message = f"{timestamp}.{method.upper()}.{path}.".encode() + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def verify(secret: bytes, *, timestamp: str | None, signature: str | None, method: str,
           path: str, body: bytes, now: float) -> str:
    """The checked signature's hex (for the replay check), or UnauthenticatedError."""
    if not timestamp or not signature:
        raise UnauthenticatedError("send X-Cortex-Timestamp and X-Cortex-Signature "
                                   "(sha256=<hex HMAC>)", code="approval_signature_missing")
    if not _unix_seconds(timestamp):
        raise UnauthenticatedError("X-Cortex-Timestamp must be unix seconds",
                                   code="approval_signature_invalid")
    age = now - int(timestamp)
    if age > MAX_AGE_S or age < -MAX_SKEW_S:
        raise UnauthenticatedError(
            f"the signed timestamp is {int(age)} s old; accepted: at most {MAX_AGE_S} s old "
            f"and {MAX_SKEW_S} s ahead", code="approval_signature_stale")
    scheme, _, given = signature.partition("=")
    expected = sign(secret, timestamp=timestamp, method=method, path=path, body=body)
    if scheme != "sha256" or not hmac.compare_digest(given.lower(), expected):
        raise UnauthenticatedError("the approval signature does not match",
                                   code="approval_signature_invalid")
    return expected
