"""Answering a write sent again with its Idempotency-Key (ADR 0030). Called by
:mod:`attested_cortex.server.replaying`.

The key itself is taken in the write's transaction (:func:`.settling.spend`); this module
holds what happens around it: the request's digest (:func:`digest`, pure), the key's row if a
committed write took it (:func:`prior`), keeping the answer once given (:func:`keep`), and the
answer of a write whose answer was never kept (:func:`rebuilt`: the connection dropped after
its COMMIT, so the server knew nothing of the commit; the object it wrote is read back).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from attested_cortex.errors import CortexError, NotFoundError
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.graph_views import link_view
from attested_cortex.service.transcripts import transcript_view
from attested_cortex.service.views import memory_view
from attested_cortex.store import idempotency, links, memories, transcripts
from attested_cortex.store.idempotency import IN_USE, Claim, Kept

__all__ = ["IN_USE", "Claim", "Kept", "Kind", "claim", "digest", "keep", "prior", "rebuilt"]

log = logging.getLogger(__name__)

#: What a keyed write writes, so that a lost answer can be rebuilt from it.
Kind = Literal["memory", "link", "transcript"]


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
               body: dict[str, Any]) -> None:
    """Keep the answer of the write that took ``key``. Best effort: the write has committed
    and its answer is given whatever happens here; if the database went away meanwhile, a
    retry rebuilds the answer from the object written (:func:`rebuilt`)."""
    try:
        async with svc.db.connection() as conn:
            await idempotency.answer(conn, caller.agent_id, key, status=status, body=body)
    except CortexError as exc:
        log.warning("the answer of a keyed write was not kept; a retry rebuilds it",
                    extra={"agent_id": caller.agent_id, "code": exc.code})


async def rebuilt(svc: Services, kind: Kind, resource_id: uuid.UUID) -> dict[str, Any]:
    """The answer of a committed write whose answer was never kept, from what it wrote as it
    is now (a later update of the object shows in it)."""
    async with svc.db.connection() as conn:
        if kind == "memory":
            return memory_view(await memories.get(conn, resource_id))
        if kind == "link":
            return link_view(await links.get_link(conn, link_id=resource_id))
        found = await transcripts.get_many(conn, [resource_id])
    if resource_id not in found:
        raise NotFoundError(f"transcript {resource_id} does not exist", id=str(resource_id))
    return transcript_view(found[resource_id], svc)


def claim(caller: Caller, key: str, request_sha256: bytes,
          resource_id: uuid.UUID | None) -> Claim:
    """What a first keyed write takes: the key, its request's digest, the id it writes."""
    return Claim(caller.agent_id, key, request_sha256, resource_id or uuid.uuid4())
