"""Settling a write inside the transaction that writes: the approval it spends and the
storage cap of the agent whose bytes it adds (ADR 0017).

Both used to be settled before the write, each in its own statement: an approval consumed
by the gate was burnt by a 429 or 413 of the quota step, by a crash before the write, or
(released on any error) spent again by a write that had committed before something failed;
a cap read before the write let concurrent writes of one agent pass it together. Now they
commit or roll back with the write itself:

- :func:`spend`, the transaction's first statement, marks the approval used with a
  conditional UPDATE: whatever fails after it (a 413 here, a database error, a crash) rolls
  the mark back, so an approval is spent exactly when its write commits.
- :func:`check_cap`, right after the statement that changes the counted rows, reads the
  owner's ``agent_usage`` row, which that statement's trigger has just updated and locked:
  concurrent writes of one owner queue on the row lock, so the value read is exact and the
  cap holds under any concurrency.

A write sent with an Idempotency-Key takes it first (:func:`spend`; ADR 0030): the key is
taken exactly when the write commits, and a retry whose answer was lost finds it.

Lock order of every write (docs/adr/0017): the key row, the approval row, the written rows,
the owners' usage rows (the trigger), the chain lock (the record, the last statement). Called by the
executes of :mod:`.memories`, :mod:`.transcripts` and :mod:`.links`; :mod:`.pipeline`
builds the :class:`Settlement`. A memory store with nothing else to write does both checks'
work in its one statement instead (no approval to spend; the cap checked by
:func:`attested_cortex.store.memories.insert_recorded`, in the same lock order).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from attested_cortex.errors import ConflictError, TooLargeError
from attested_cortex.store import approvals, idempotency, usage
from attested_cortex.store.database import Conn
from attested_cortex.store.idempotency import Claim


@dataclass(frozen=True)
class Cap:
    """The stored-bytes cap a growing write must keep: ``owner``'s, at most ``limit``."""

    owner: str
    limit: int


@dataclass(frozen=True)
class Settlement:
    """What one write settles in its transaction (nothing by default)."""

    approval: uuid.UUID | None = None
    cap: Cap | None = None
    claim: Claim | None = None  # the Idempotency-Key the write takes (ADR 0030)


NOTHING = Settlement()


async def spend(conn: Conn, settlement: Settlement) -> None:
    """Take the write's Idempotency-Key, then mark its approval used (409 when another
    request took the key or used the approval first)."""
    if settlement.claim is not None:
        await idempotency.take(conn, settlement.claim)
    if settlement.approval is None:
        return
    if not await approvals.consume(conn, settlement.approval):
        raise ConflictError(
            f"approval {settlement.approval} was used by another request: it cannot complete "
            "this one", code="approval_not_usable", status="approved")


async def check_cap(conn: Conn, settlement: Settlement, *, adds: int) -> None:
    """Refuse (413, rolling the write back) a write that took its owner past the cap."""
    cap = settlement.cap
    if cap is None:
        return
    used = (await usage.stored(conn, agent=cap.owner)).total
    if used > cap.limit:
        raise over_cap(cap, used=used - adds, adds=adds)


def chosen_id(settlement: Settlement) -> uuid.UUID | None:
    """The id a keyed write gives what it creates (its key's row names it), else None."""
    return settlement.claim.resource_id if settlement.claim is not None else None


def over_cap(cap: Cap, *, used: int, adds: int) -> TooLargeError:
    """The 413 of a write that would take ``cap.owner`` past its stored-bytes cap."""
    return TooLargeError(
        f"agent {cap.owner} stores {used} bytes; this write adds {adds} and the storage "
        f"quota (storage_per_agent_bytes) is {cap.limit}: delete memories, let transcript "
        "retention prune transcripts, or ask the operator to raise the quota",
        code="storage_quota_exceeded", limit=cap.limit, used=used, adds=adds,
        quota="storage_per_agent_bytes")
