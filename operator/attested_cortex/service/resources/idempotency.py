"""Writes sent with an Idempotency-Key: done once, answered the same each time (ADR 0030).
Called by :mod:`attested_cortex.server.replaying` (HTTP) and :mod:`attested_cortex.mcp.calling`
(MCP tool calls), through :func:`once`.

A client that got a 503 (or no answer at all) during a failover cannot know whether its write
committed. Sent again with the same key and the same request, it gets the answer of the write
that committed (``replayed``), or the write runs now if none did; never two writes. The same
key with another request is refused (409 ``idempotency_key_reused``). Keys belong to the
authenticated agent. Only a committed write takes a key: a refusal or a 503 leaves it free.

The key itself is taken in the write's transaction (:func:`.settling.spend`); this module
holds what happens around it: the request's digest (:func:`digest`, pure), the key's row if a
committed write took it (:func:`prior`), keeping the answer once given (:func:`keep`), and the
answer of a write whose answer was never kept (:meth:`AnswerKind.rebuilt`: the connection
dropped after its COMMIT, so the server knew nothing of the commit; the object it wrote is
read back).

Each kind of answer is an :class:`AnswerKind` declared by the resource module whose write
makes it (``memories.MEMORY``, ``batches.MEMORIES``, ``links.LINK``,
``transcripts.TRANSCRIPT``): its encoder and how its object is read back sit next to the
write, so a first answer and a rebuilt one are encoded by the same function, and this module
names no resource (issue 43 item 10: it rebuilt answers through a ``kind ==`` switch over the
resources' views, and called back into each route's closure for the first answer).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from attested_cortex.errors import ConflictError, CortexError
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.deadlines import write_deadline
from attested_cortex.store import idempotency
from attested_cortex.store.idempotency import IN_USE, Claim, Kept

__all__ = ["IN_USE", "AnswerKind", "Claim", "Kept", "WriteFn", "Written",
           "digest", "keep", "once", "prior"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: A keyed write run for a caller (the caller carrying the key's claim): the object it wrote.
WriteFn = Callable[[Caller], Awaitable[T]]


@dataclass(frozen=True)
class AnswerKind(Generic[T]):
    """What a keyed write writes and how it is answered, declared once by the resource module
    whose write makes it: ``encode`` is the answer's JSON of the object written (the same for
    a first answer and a rebuilt one), ``read`` reads that object back by the id the key chose
    (:attr:`Claim.resource_id`) when the write committed but its answer was lost. Callers
    hand the kind itself to :func:`once`: nothing looks one up by ``name`` (which tests and
    logs read), so there is no registry to fill in import order (ADR 0135)."""

    name: str
    encode: Callable[[Services, T], dict[str, Any]]
    read: Callable[[Services, uuid.UUID], Awaitable[T]]

    async def rebuilt(self, svc: Services, resource_id: uuid.UUID) -> dict[str, Any]:
        """The answer of a committed write whose answer was never kept, from what it wrote as
        it is now (a later update of the object shows in it)."""
        return self.encode(svc, await self.read(svc, resource_id))



@dataclass(frozen=True)
class Written:
    """A write's answer: its body and status, and whether an earlier request wrote it."""

    answer: dict[str, Any]
    status: int
    replayed: bool = False


async def once(svc: Services, caller: Caller, write: WriteFn[T], *, operation: str,
               request: Mapping[str, Any], answer: AnswerKind[T], status: int,
               resource_id: uuid.UUID | None = None) -> Written:
    """``write`` run for ``caller`` and answered ``status`` with ``answer``'s encoding of
    what it wrote; with the caller's Idempotency-Key, at most once per key (``resource_id``:
    the object an update changes; a create's id is chosen here, so that a lost answer can be
    read back)."""
    key = caller.idempotency_key
    if key is None:
        return Written(answer.encode(svc, await write(caller)), status)
    sha = digest(operation, request)
    for _ in range(2):  # a concurrent request with the key committed first: answer as it
        kept = await prior(svc, caller, key)
        if kept is not None:
            return await _replayed(svc, caller, key, kept, sha, answer=answer, status=status)
        taking = dataclasses.replace(caller, claim=Claim(
            caller.agent_id, key, sha, resource_id or uuid.uuid4()))
        try:
            written = await write(taking)
        except ConflictError as exc:
            if exc.code != IN_USE:
                raise
            continue
        body = answer.encode(svc, written)
        await keep(svc, caller, key, status=status, body=body)
        return Written(body, status)
    raise ConflictError("a request with this Idempotency-Key is still in flight; retry",
                        code=IN_USE)


async def _replayed(svc: Services, caller: Caller, key: str, kept: Kept, sha: bytes, *,
                    answer: AnswerKind[Any], status: int) -> Written:
    if kept.request_sha256 != sha:
        raise ConflictError(
            "this Idempotency-Key was used for a different request (another operation or "
            "body); use a new key for a new write", code="idempotency_key_reused")
    if kept.answer is not None and kept.status is not None:
        return Written(kept.answer, kept.status, replayed=True)
    # committed, but its answer was lost on the way, or was sealed under a key version the
    # ring no longer holds (kept again, under the current one)
    body = await answer.rebuilt(svc, kept.resource_id)
    # Kept before it is answered, within the write deadline: the write may stand on the
    # primary alone (cancelled at its deadline while a synchronous replica was away), and the
    # commit of its answer, later in the WAL, is confirmed only once a replica has both
    # (ADR 0090). Until then this retry is a 503 too, never an acknowledgement.
    await keep(svc, caller, key, status=status, body=body, replace=kept.unreadable,
               strict=True)
    return Written(body, status, replayed=True)


def digest(operation: str, body: Mapping[str, Any]) -> bytes:
    """The SHA-256 of an operation and its parsed body, canonical (key order and spacing do
    not matter): the same request sent again has the same digest."""
    text = json.dumps([operation, body], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).digest()


async def prior(svc: Services, caller: Caller, key: str) -> Kept | None:
    """The row of ``caller``'s ``key`` if a committed write took it."""
    async with svc.db.connection() as conn:
        return await idempotency.find(conn, caller.agent_id, key)


async def keep(svc: Services, caller: Caller, key: str, *, status: int,
               body: dict[str, Any], replace: bool = False, strict: bool = False) -> None:
    """Keep the answer of the write that took ``key``, within the write deadline. Best
    effort after the write's own confirmed commit: its answer is given whatever happens here;
    if the database went away meanwhile, a retry rebuilds the answer from the object written
    (:meth:`AnswerKind.rebuilt`). ``strict`` (a retry answering a write whose answer was lost): a
    failure is the retry's answer."""
    try:
        async with write_deadline(svc.limits.write_timeout_ms), svc.db.connection() as conn:
            await idempotency.answer(conn, caller.agent_id, key, status=status, body=body,
                                     replace=replace)
    except CortexError as exc:
        if strict:
            raise
        log.warning("the answer of a keyed write was not kept; a retry rebuilds it",
                    extra={"agent_id": caller.agent_id, "code": exc.code})
