"""Reading a small JSON report from a pod the operator already lists (a witness's
``/report``, a cortex's ``/v1/delivery-report``): one bounded GET in a thread (the standard
library's client), so neither reader keeps its own copy of the timeout, size and parse rules.

Anything short of a JSON object within the bounds (refused, reset, timed out, an HTTP
error, too large, not JSON) is "unread" (None), never an error: the caller's status keeps
what it showed.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from typing import Any

Object = dict[str, Any]


def _fetch(url: str, timeout_s: float, max_bytes: int,
           trust: ssl.SSLContext | None) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s,  # noqa: S310
                                    context=trust) as answer:
            return bytes(answer.read(max_bytes + 1)) if answer.status == 200 else None
    except (OSError, ValueError):  # refused, reset, timed out, an HTTP error
        return None


async def read_object(url: str, *, timeout_s: float, max_bytes: int,
                      trust: ssl.SSLContext | None = None) -> Object | None:
    """The JSON object at ``url``, or None when it cannot be read now."""
    body = await asyncio.to_thread(_fetch, url, timeout_s, max_bytes, trust)
    if body is None or len(body) > max_bytes:
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
