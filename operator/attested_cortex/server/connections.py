"""The connection layer: requests aiohttp's HTTP parser rejects are answered and logged
without the bytes that were sent.

aiohttp answers a malformed request (a control character in a header value, a header line
over 8190 bytes, a bad Content-Length) itself, before any middleware runs: it logs the
parser's exception at error level, whose text quotes the raw header line, and echoes that
text in a ``text/plain`` 400. For ``Authorization: Bearer <token>\\x01`` both carry a valid
token. :class:`CortexRunner` (used by ``cortexctl serve`` and the tests' servers) makes its
connections answer such a request with the JSON error envelope, code ``bad_http``, and log
one warning naming only the kind of error and the peer.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)


class QuietRequestHandler(RequestHandler):
    """A connection whose parse errors neither log nor echo the offending bytes."""

    __slots__ = ()

    def handle_error(
        self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Answer a parser rejection with the envelope; anything else as aiohttp does."""
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        log.warning("rejected a malformed HTTP request", extra={
            "reason": type(exc).__name__, "status": status, "remote": request.remote})
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started; the connection is closed")
        response = web.json_response({"error": {
            "code": "bad_http",
            "message": "the HTTP request is malformed (a header line is invalid or too long); "
                       "the connection is closed",
            "details": {"reason": type(exc).__name__},
        }}, status=status if 400 <= status < 500 else 400)
        response.force_close()
        return response


class _QuietServer(web.Server):
    """Builds :class:`QuietRequestHandler` connections."""

    def __call__(self) -> RequestHandler:
        return QuietRequestHandler(self, loop=self._loop, **self._kwargs)


class CortexRunner(web.AppRunner):
    """``web.AppRunner`` whose connections are :class:`QuietRequestHandler`."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _QuietServer  # same layout; only __call__ differs
        return server

