"""Stored bytes per agent: the global storage cap of the quota step, and live usage.

What counts: a memory's text, title and metadata while it is live, and a transcript's
compressed frame and metadata until it is pruned (:mod:`attested_cortex.store.usage`). The
cap is global (every replica reads the same database). :func:`check_storage` is the quota
step's early refusal (before the hooks' and the write's work, without a lock); the write
itself checks again in its transaction, against the usage row its statement locked
(:mod:`.settling`), so concurrent writes of one agent never pass the cap together
(``docs/adr/0017-settling-writes-in-their-transaction.md``).
"""

from __future__ import annotations

from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.pipeline.settling import Cap, over_cap
from attested_cortex.store import usage as rows
from attested_cortex.store.usage import Usage


async def check_storage(svc: Services, cap: Cap, adds: int) -> None:
    """Refuse a write that would take the owner past its stored-bytes cap (413)."""
    used = (await stored(svc, cap.owner)).total
    if used + adds > cap.limit:
        raise over_cap(cap, used=used, adds=adds)


async def stored(svc: Services, agent_id: str) -> Usage:
    """What the agent stores now, by kind."""
    async with svc.db.connection() as conn:
        return await rows.stored(conn, agent=agent_id)
