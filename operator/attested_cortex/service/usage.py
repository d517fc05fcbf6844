"""Stored bytes per agent: the global storage cap of the quota step, and live usage.

The cap is global (every replica reads the same database); the check runs before the write
it guards, so replicas racing one agent's writes may pass the cap by at most the writes in
flight (``docs/adr/0010-quotas.md``).
"""

from __future__ import annotations

from attested_cortex.errors import TooLargeError
from attested_cortex.service.context import Caller, Services
from attested_cortex.store import memories as rows


async def check_storage(svc: Services, caller: Caller, adds: int) -> None:
    """Refuse a write that would take the agent past its stored-bytes cap (413)."""
    limit = svc.policy.storage_limit(caller.agent_id)
    async with svc.db.connection() as conn:
        used = await rows.stored_bytes(conn, author=caller.agent_id)
    if used + adds > limit:
        raise TooLargeError(
            f"agent {caller.agent_id} stores {used} bytes; this write adds {adds} and the "
            f"storage quota (storage_per_agent_bytes) is {limit}: delete memories or ask "
            "the operator to raise the quota",
            code="storage_quota_exceeded", limit=limit, used=used, adds=adds,
            quota="storage_per_agent_bytes")


async def stored(svc: Services, agent_id: str) -> int:
    """Bytes the agent stores now."""
    async with svc.db.connection() as conn:
        return await rows.stored_bytes(conn, author=agent_id)
