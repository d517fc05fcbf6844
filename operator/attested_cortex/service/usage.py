"""Stored bytes per agent: the global storage cap of the quota step, and live usage.

What counts: a memory's text, title and metadata while it is live, and a transcript's
compressed frame and metadata until it is pruned (:mod:`attested_cortex.store.usage`). The
cap is global (every replica reads the same database); the check runs before the write it
guards, so replicas racing one agent's writes may pass the cap by at most the writes in
flight (``docs/adr/0010-quotas.md``).
"""

from __future__ import annotations

from attested_cortex.errors import TooLargeError
from attested_cortex.service.context import Caller, Services
from attested_cortex.store import usage as rows
from attested_cortex.store.usage import Usage


async def check_storage(svc: Services, caller: Caller, adds: int) -> None:
    """Refuse a write that would take the agent past its stored-bytes cap (413)."""
    limit = svc.policy.storage_limit(caller.agent_id)
    used = (await stored(svc, caller.agent_id)).total
    if used + adds > limit:
        raise TooLargeError(
            f"agent {caller.agent_id} stores {used} bytes; this write adds {adds} and the "
            f"storage quota (storage_per_agent_bytes) is {limit}: delete memories, let "
            "transcript retention prune transcripts, or ask the operator to raise the quota",
            code="storage_quota_exceeded", limit=limit, used=used, adds=adds,
            quota="storage_per_agent_bytes")


async def stored(svc: Services, agent_id: str) -> Usage:
    """What the agent stores now, by kind."""
    async with svc.db.connection() as conn:
        return await rows.stored(conn, agent=agent_id)
