"""Reading request bodies into validated command models.

The body must be declared JSON (``Content-Type: application/json`` or a ``+json`` type, or
no Content-Type at all; anything else is 415), is read within the configured size (413
beyond it), decoded as strict UTF-8, parsed as JSON and validated by the operation's
pydantic model; each failure is a 400 that names the problem, and nothing is written before
all of this passed. JSON that Python parses but nothing downstream can carry is refused
here too: nesting deeper than :data:`MAX_JSON_DEPTH`, integers past the parser's 4300-digit
limit, ``NaN``/``Infinity`` and lone UTF-16 surrogates (``"\\ud800"``), which cannot be
encoded as UTF-8 for the database (:mod:`attested_cortex.jsonbounds`, shared with MCP).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import hdrs, web
from pydantic import ValidationError

from attested_cortex.errors import BodyTimeoutError, TooLargeError, UnsupportedMediaTypeError
from attested_cortex.jsonbounds import (
    MAX_JSON_DEPTH,
    M,
    check_value,
    decode_json,
    parse,
    validation_error,
)
from attested_cortex.server.state import state

__all__ = ["MAX_JSON_DEPTH", "body_deadline", "check_content_type", "check_value",
           "decode_json", "parse", "read_json", "read_model", "read_query", "read_raw",
           "validation_error"]


_BODY_KEY = web.RequestKey("cortex_body", bytes)


async def read_json(request: web.Request, *, max_bytes: int) -> Any:
    """The parsed JSON body."""
    check_content_type(request.headers.get(hdrs.CONTENT_TYPE))
    if request.content_length is not None and request.content_length > max_bytes:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes)
    return decode_json(await read_raw(request, max_bytes=max_bytes))


async def read_raw(request: web.Request, *, max_bytes: int) -> bytes:
    """The body, read up to ``max_bytes`` (413 past it, nothing more read). The route's own
    bound, not the application's ``client_max_size`` (``limits.max_body_bytes``), which
    ``request.read()`` applies to every route: it refused batch bodies past 1 MiB while
    capabilities said ``max_batch_body_bytes`` (16 MiB). Kept on the request, so a route that
    reads it twice (the approval's signature and its command) gets the same bytes."""
    kept: bytes | None = request.get(_BODY_KEY)
    if kept is not None:
        return kept
    chunks: list[bytes] = []
    size = 0
    async with body_deadline(request):
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > max_bytes:
                raise TooLargeError(f"the body is larger than {max_bytes} bytes",
                                    limit=max_bytes)
            chunks.append(chunk)
    request[_BODY_KEY] = raw = b"".join(chunks)
    return raw


@contextlib.asynccontextmanager
async def body_deadline(request: web.Request) -> AsyncIterator[None]:
    """Read the body within ``limits.body_read_timeout_s``, else 408 ``body_timeout``: a
    client that trickles its body holds no handler for ever. Every body reader (the routes,
    the MCP bridge) goes through this one bound."""
    timeout = state(request).services.limits.body_read_timeout_s
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError as exc:
        raise BodyTimeoutError(f"the body did not arrive within {timeout:g} s",
                               limit_s=timeout) from exc


def check_content_type(header: str | None) -> None:
    """Refuse (415) a body declared as anything but JSON in UTF-8."""
    if header is None:
        return
    mime, _, params = header.partition(";")
    mime = mime.strip().lower()
    charset = next((p.split("=", 1)[1].strip().strip('"').lower() for p in params.split(";")
                    if p.strip().lower().startswith("charset=")), "utf-8")
    if (mime == "application/json" or mime.endswith("+json")) and charset in ("utf-8", "utf8"):
        return
    raise UnsupportedMediaTypeError(
        "send the body as Content-Type: application/json (UTF-8)", content_type=mime[:100]
    )


async def read_model(request: web.Request, model: type[M], *, max_bytes: int) -> M:
    """Read, decode, parse and validate a request body as ``model``."""
    return parse(model, await read_json(request, max_bytes=max_bytes))


def read_query(request: web.Request, model: type[M]) -> M:
    """The query string as ``model`` (the parameters it names; others are ignored). Values
    are text, so they are converted as pydantic's lax mode does ("50" -> 50, "true")."""
    keys = {name: field.alias or name for name, field in model.model_fields.items()}
    data = {key: request.query[key] for key in keys.values() if key in request.query}
    try:
        return model.model_validate(data, strict=False)
    except ValidationError as exc:
        raise validation_error(exc) from exc
