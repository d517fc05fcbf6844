"""Pending actions, used decision signatures and remembered rules: the approval tables.

Called by :mod:`attested_cortex.service.workers.approving` only. Every state change is one
conditional statement, so two servers on one database cannot both decide, expire or consume
the same action.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from attested_cortex.store.database import Conn

_COLUMNS = ("id, agent_id, operation, rule_operation, namespace, request, fingerprint, reason, "
            "source, status, remember, created_at, expires_at, decided_at, decided_by, "
            "consumed_at, key_version")


@dataclass(frozen=True)
class Action:
    """One held operation."""

    id: uuid.UUID
    agent_id: str
    operation: str
    rule_operation: str | None
    namespace: str | None
    request: dict[str, Any]
    fingerprint: str
    reason: str | None
    source: str
    status: str
    remember: bool
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    consumed_at: datetime | None
    #: The master key version ``request`` is sealed under (migration 0015); None: plain.
    key_version: int | None = None


def _action(row: dict[str, Any]) -> Action:
    return Action(**row)


async def insert(conn: Conn, *, agent_id: str, operation: str, rule_operation: str | None,
                 namespace: str | None, request: dict[str, Any], fingerprint: str,
                 reason: str | None, source: str, timeout_s: int,
                 action_id: uuid.UUID | None = None, key_version: int | None = None) -> Action:
    """Hold an operation until ``timeout_s`` from now (``request`` sealed under
    ``key_version`` when one is given)."""
    cur = await conn.execute(
        f"INSERT INTO pending_actions (id, agent_id, operation, rule_operation, namespace, "
        f"request, fingerprint, reason, source, expires_at, key_version) VALUES (%s, %s, %s, "
        f"%s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s), %s) RETURNING {_COLUMNS}",
        (action_id or uuid.uuid4(), agent_id, operation, rule_operation, namespace,
         Jsonb(request), fingerprint, reason, source, timeout_s, key_version))
    row = await cur.fetchone()
    assert row is not None
    return _action(row)


async def get(conn: Conn, action_id: uuid.UUID) -> Action | None:
    """The action, or None."""
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM pending_actions WHERE id = %s",
                             (action_id,))
    row = await cur.fetchone()
    return _action(row) if row is not None else None


async def pending(conn: Conn, *, after: tuple[datetime, uuid.UUID] | None,
                  limit: int) -> list[Action]:
    """Undecided, unexpired actions, oldest first, after the ``(created_at, id)`` of the last
    one a page showed (a keyset page: each action once while others come and go)."""
    keyset = "AND (created_at, id) > (%s, %s) " if after is not None else ""
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM pending_actions WHERE status = 'pending' AND expires_at > now() "
        f"{keyset}ORDER BY created_at, id LIMIT %s", (*(after or ()), limit))
    return [_action(row) for row in await cur.fetchall()]


@dataclass(frozen=True)
class Held:
    """What one agent has held: its open actions, their request bytes, the next expiry."""

    count: int
    request_bytes: int
    next_expiry: datetime | None


async def held_by(conn: Conn, agent_id: str) -> Held:
    """The agent's open actions, serialised with its other holds (an advisory lock of the
    agent until the transaction ends: two holds at once cannot both pass the bound)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                       (f"cortex_held:{agent_id}",))
    cur = await conn.execute(
        "SELECT count(*) AS n, coalesce(sum(octet_length(request::text)), 0) AS bytes, "
        "min(expires_at) AS next FROM pending_actions "
        "WHERE agent_id = %s AND status = 'pending' AND expires_at > now()", (agent_id,))
    row = await cur.fetchone()
    assert row is not None
    return Held(int(row["n"]), int(row["bytes"]), row["next"])


async def purge(conn: Conn, *, older_than_s: int) -> int:
    """Delete decided and expired actions closed longer than ``older_than_s`` ago (those a
    remembered rule names stay: the rule cites them); returns how many."""
    cur = await conn.execute(
        "DELETE FROM pending_actions p WHERE status <> 'pending' "
        "AND decided_at < now() - make_interval(secs => %s) "
        "AND NOT EXISTS (SELECT 1 FROM remembered_rules r WHERE r.approval_id = p.id)",
        (older_than_s,))
    return cur.rowcount


async def count_pending(conn: Conn) -> int:
    """How many actions wait for a decision."""
    cur = await conn.execute("SELECT count(*) AS n FROM pending_actions "
                             "WHERE status = 'pending' AND expires_at > now()")
    row = await cur.fetchone()
    return int(row["n"]) if row is not None else 0


async def decide(conn: Conn, action_id: uuid.UUID, *, status: str, decided_by: str,
                 remember: bool) -> Action | None:
    """Approve or reject a pending, unexpired action; None when it was not pending."""
    cur = await conn.execute(
        f"UPDATE pending_actions SET status = %s, decided_by = %s, remember = %s, "
        f"decided_at = now() WHERE id = %s AND status = 'pending' AND expires_at > now() "
        f"RETURNING {_COLUMNS}", (status, decided_by, remember, action_id))
    row = await cur.fetchone()
    return _action(row) if row is not None else None


async def expire(conn: Conn) -> list[Action]:
    """Mark every overdue pending action expired; returns them."""
    cur = await conn.execute(
        f"UPDATE pending_actions SET status = 'expired', decided_at = now() "
        f"WHERE status = 'pending' AND expires_at <= now() RETURNING {_COLUMNS}")
    return [_action(row) for row in await cur.fetchall()]


async def consume(conn: Conn, action_id: uuid.UUID) -> bool:
    """Mark an approved action used; False when it is not approved or already used."""
    cur = await conn.execute(
        "UPDATE pending_actions SET consumed_at = now() WHERE id = %s AND status = 'approved' "
        "AND consumed_at IS NULL RETURNING id", (action_id,))
    return await cur.fetchone() is not None


async def release(conn: Conn, action_id: uuid.UUID) -> None:
    """Undo :func:`consume` after the operation itself failed (nothing was written)."""
    await conn.execute("UPDATE pending_actions SET consumed_at = NULL WHERE id = %s",
                       (action_id,))


async def use_signature(conn: Conn, signature: str) -> bool:
    """Record a decision signature; False when it was used before (a replay)."""
    cur = await conn.execute(
        "INSERT INTO approval_signatures (signature) VALUES (%s) ON CONFLICT DO NOTHING "
        "RETURNING signature", (signature,))
    return await cur.fetchone() is not None


async def prune_signatures(conn: Conn, *, older_than_s: int) -> None:
    """Forget signatures too old to be accepted anyway."""
    await conn.execute("DELETE FROM approval_signatures "
                       "WHERE used_at < now() - make_interval(secs => %s)", (older_than_s,))


async def remember(conn: Conn, action: Action) -> None:
    """Persist the allow rule of a ``remember: forever`` approval."""
    await conn.execute(
        "INSERT INTO remembered_rules (approval_id, agent_id, operation, namespace) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (action.id, action.agent_id, action.rule_operation or action.operation,
         action.namespace or "**"))


async def remembered(conn: Conn) -> list[dict[str, Any]]:
    """Every remembered rule, oldest first."""
    cur = await conn.execute("SELECT approval_id, agent_id, operation, namespace "
                             "FROM remembered_rules ORDER BY created_at, approval_id")
    return list(await cur.fetchall())
