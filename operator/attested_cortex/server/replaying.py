"""The ``Idempotency-Key`` header of HTTP writes (ADR 0030): read once by the authentication
middleware into the caller, and the write routes (memories, links, transcripts) answered
through :func:`attested_cortex.service.resources.idempotency.once`: a repeated request gets
the first answer with ``Idempotent-Replayed: true``. A route hands over the service write
itself (a ``functools.partial`` of it, so nothing calls back into the route) and the answer
kind its resource module declares (``memories.MEMORY``, ...), which encodes the answer.
"""

from __future__ import annotations

import re
import uuid
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel

from attested_cortex.errors import InvalidInputError
from attested_cortex.server.encoding import json_answer
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import idempotency

T = TypeVar("T")
HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
#: Printable ASCII without spaces, as the IETF draft's examples (UUIDs, random tokens).
_GOOD_KEY = re.compile(r"[\x21-\x7e]{1,255}")


def key_of(request: web.Request) -> str | None:
    """The request's Idempotency-Key, or None (400 when it is malformed)."""
    key = request.headers.get(HEADER)
    if key is None or _GOOD_KEY.fullmatch(key):
        return key
    raise InvalidInputError(f"{HEADER} must be 1 to 255 printable ASCII characters without "
                            "spaces (a UUID is a good key)", field=HEADER)


async def once(request: web.Request, body: BaseModel, write: idempotency.WriteFn[T], *,
               answer: idempotency.AnswerKind[T], status: int = 200,
               resource_id: uuid.UUID | None = None) -> web.Response:
    """``write`` answered ``status`` (as ``answer`` encodes what it wrote), at most once per
    Idempotency-Key."""
    who = caller(request)
    # the request's digest is only needed with a key (a plain write skips the dump)
    shown = body.model_dump(mode="json") if who.idempotency_key is not None else {}
    written = await idempotency.once(
        state(request).services, who, write, operation=f"{request.method} {request.path}",
        request=shown, answer=answer, status=status, resource_id=resource_id)
    response = json_answer(written.answer, status=written.status)
    if written.replayed:
        response.headers[REPLAYED] = "true"
    return response
