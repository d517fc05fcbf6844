"""Writes sent with an ``Idempotency-Key`` header: done once, answered the same each time
(ADR 0030). Called by the write routes (memories, links, transcripts).

A client that got a 503 (or no answer at all) during a failover cannot know whether its
write committed. Sent again with the same key and the same body, it gets the answer of the
write that committed (header ``Idempotent-Replayed: true``), or the write runs now if none
did; never two writes. The same key with another body is refused (409
``idempotency_key_reused``). Keys belong to the authenticated agent: two agents' keys never
meet. Only a committed write takes a key: a refusal (4xx) or a 503 leaves it free.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.server.state import caller, state
from attested_cortex.service import idempotency
from attested_cortex.service.context import Caller, Services

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
#: Printable ASCII without spaces, as the IETF draft's examples (UUIDs, random tokens).
_GOOD_KEY = re.compile(r"[\x21-\x7e]{1,255}")

WriteFn = Callable[[Caller], Awaitable[dict[str, Any]]]


def key_of(request: web.Request) -> str | None:
    """The request's Idempotency-Key, or None (400 when it is malformed)."""
    key = request.headers.get(HEADER)
    if key is None or _GOOD_KEY.fullmatch(key):
        return key
    raise InvalidInputError(f"{HEADER} must be 1 to 255 printable ASCII characters without "
                            "spaces (a UUID is a good key)", field=HEADER)


async def once(request: web.Request, body: BaseModel, write: WriteFn, *,
               kind: idempotency.Kind, status: int = 200,
               resource_id: uuid.UUID | None = None) -> web.Response:
    """``write`` run for the caller and answered ``status``: with an Idempotency-Key, at
    most once per key (``resource_id``: the object an update changes; a create's id is
    chosen here so that a lost answer can be read back)."""
    who, key = caller(request), key_of(request)
    if key is None:
        return web.json_response(await write(who), status=status)
    svc = state(request).services
    sha = idempotency.digest(f"{request.method} {request.path}", body.model_dump(mode="json"))
    for _ in range(2):  # a concurrent request with the key committed first: answer as it
        kept = await idempotency.prior(svc, who, key)
        if kept is not None:
            return await _replayed(svc, who, key, kept, sha, kind=kind, status=status)
        taking = dataclasses.replace(
            who, claim=idempotency.claim(who, key, sha, resource_id))
        try:
            answer = await write(taking)
        except ConflictError as exc:
            if exc.code != idempotency.IN_USE:
                raise
            continue
        await idempotency.keep(svc, who, key, status=status, body=answer)
        return web.json_response(answer, status=status)
    raise ConflictError("a request with this Idempotency-Key is still in flight; retry",
                        code=idempotency.IN_USE)


async def _replayed(svc: Services, who: Caller, key: str, kept: idempotency.Kept,
                    sha: bytes, *, kind: idempotency.Kind, status: int) -> web.Response:
    if kept.request_sha256 != sha:
        raise ConflictError(
            f"this {HEADER} was used for a different request (another path or body); "
            "use a new key for a new write", code="idempotency_key_reused")
    answer, given = kept.answer, kept.status
    if answer is None or given is None:  # committed, but its answer was lost on the way
        answer, given = await idempotency.rebuilt(svc, kind, kept.resource_id), status
        await idempotency.keep(svc, who, key, status=given, body=answer)
    response = web.json_response(answer, status=given)
    response.headers[REPLAYED] = "true"
    return response
