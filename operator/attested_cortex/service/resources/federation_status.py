"""The outbound senders' state for ``GET /v1/capabilities`` (issue 42, docs/federation.md):
per peer, the cursor, the lag behind the outbox head, the changes acknowledged, the failed
attempts in a row, the last ACK and the last failure, and the failure's short reason.

Read from ``federation_cursors`` (the same on every replica: the lease holder writes it,
ADR 0139) and the outbox's head. Carries peer names only, never a URL or a credential; the
reasons the sender records are its own short codes (``no answer: <error type>``, an answer
status), never a host or a body.
"""

from __future__ import annotations

from typing import Any

from attested_cortex.service.pipeline.context import Services
from attested_cortex.store import federation_sending as rows
from attested_cortex.store import outbox


async def senders(svc: Services) -> dict[str, Any]:
    """``{enabled, head, peers: [...]}``; ``enabled`` false before migration 0042 or when
    nothing was ever sent (no peer has a cursor yet)."""
    async with svc.db.connection() as conn:
        if not svc.outbox or not await rows.present(conn):
            return {"enabled": False, "peers": []}
        states = await rows.states(conn)
        head = (await outbox.bounds(conn))[1] if states else 0
    return {"enabled": bool(states), "head": head, "peers": [{
        "peer": s.peer, "cursor": s.cursor, "lag": max(0, head - s.cursor), "sent": s.sent,
        "failed_attempts": s.failed_attempts,
        "last_ack_at": s.last_success_at.isoformat() if s.last_success_at else None,
        "last_failure_at": s.last_failure_at.isoformat() if s.last_failure_at else None,
        "last_error": s.last_error} for s in states]}
