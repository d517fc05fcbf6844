"""The HTTP error boundary: every failure leaves as ``{"error": {code, message, details}}``.

Domain errors map to their status (``CortexError.http_status``); aiohttp's own HTTP
exceptions (404 route, 405, 413 body) are wrapped in the same envelope; anything else is a
bug, logged with the request id and answered 500 without internals.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import hdrs, web

from attested_cortex.errors import CortexError, HeldForApprovalError, QuotaExceededError

log = logging.getLogger(__name__)

#: Seconds a 503 asks the client to wait: the pool reconnects within 0.2 s of the database
#: answering again (store/pooling.py), so one second is never early by much. The shortest
#: Retry-After there is: a shorter wait is the server's own, for a request that arrives
#: while the database is away (it waits for it up to db_reconnect_wait_ms, ADR 0126).
RETRY_AFTER_S = 1


def error_response(status: int, code: str, message: str, details: Any = None) -> web.Response:
    """The JSON error envelope."""
    return web.json_response(
        {"error": {"code": code, "message": message, "details": details or {}}}, status=status
    )


def from_domain(exc: CortexError) -> web.Response:
    """The response for a domain error."""
    response = error_response(exc.http_status, exc.code, exc.message, exc.details)
    if isinstance(exc, QuotaExceededError):
        response.headers["Retry-After"] = str(exc.retry_after)
    elif exc.http_status == 503:
        # the database is away, restarting or changing primaries (ADR 0030): nothing was
        # written unless a COMMIT's answer was lost, which a retry with an Idempotency-Key
        # answers once
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    if isinstance(exc, HeldForApprovalError):
        response.headers["Location"] = f"/v1/approvals/{exc.approval_id}"
    return response


_HTTP_CODES = {
    404: "not_found", 405: "method_not_allowed", 413: "too_large", 400: "invalid_input",
    415: "unsupported_media_type", 401: "unauthenticated",
}

_KEPT_HEADERS = (hdrs.ALLOW, hdrs.RETRY_AFTER, hdrs.WWW_AUTHENTICATE)


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Turn every exception into the envelope (and never a 500 for bad input)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except CortexError as exc:
        if exc.http_status >= 500 and exc.http_status not in (501, 503):
            log.exception("internal error")
        return from_domain(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "http_error")
        response = error_response(exc.status, code, exc.reason)
        for name in _KEPT_HEADERS:  # a 405 must still say which methods the path allows
            if name in exc.headers:
                response.headers[name] = exc.headers[name]
        return response
    except Exception:
        log.exception("unhandled error")
        return error_response(500, "internal", "internal error; see the server log")
