"""The background path that turns the spoke-memory family's ``pending`` receipts into
``committed`` or ``failed`` (ADR 0069).

Built at start-up when the server has an OpenAI-compatible reflection endpoint
(:func:`attested_cortex.server.assembling.open_services`), kept in ``Services.pending``. An op
that answers ``pending`` leaves a row of ``memory_pending_work`` in the transaction that took
its receipt (:mod:`attested_cortex.store.spoke_pending`). One bounded background task per
server claims the oldest row ``FOR UPDATE SKIP LOCKED`` and keeps the transaction open while
it works: the endpoint call (bounded by ``timeout_s``), then the reflection, the receipt's
outcome and the row's deletion, all committed together. So two servers never run one job
(the second skips the locked row), a job runs to one outcome (the effect and the settled
receipt commit or roll back as one), and a server killed in the middle of a job (kill -9, a
lost node) rolls back: the row is claimed again by the next pass of any server.

A reflection job re-reads its pinned basis: a record or profile whose revision moved since
the request (or a record deleted) fails the receipt ``basis_changed`` (the client generates
again over the new state). A timeout or an error of the endpoint fails it with the endpoint
client's code and a short reason in the receipt's ``extensions`` (never content or a key);
a committed receipt's ``extensions`` record the cost (the endpoint's token usage and the
time it took). Idle, the worker looks every ``idle_s`` seconds; :meth:`wake` (called after a
pending op commits on this server) makes it look at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attested_cortex import tasks
from attested_cortex.embedding.chat import ChatClient, ChatError
from attested_cortex.errors import CortexError
from attested_cortex.spoke import reflecting
from attested_cortex.spoke.models import ReflectionBasis
from attested_cortex.store import spoke_candidates as listing
from attested_cortex.store import spoke_memory as rows
from attested_cortex.store import spoke_pending as pending
from attested_cortex.store.database import Conn, Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """How one job ended: the receipt's status, refs, error code and extensions."""

    status: str
    refs: Sequence[str] = ()
    error_code: str | None = None
    extensions: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def failed(code: str, reason: str) -> Outcome:
        return Outcome("failed", (), code, {"reason": reason})


@dataclass(frozen=True)
class Reflector:
    """The OpenAI-compatible reflection engine: its client and the bound on one call."""

    client: ChatClient
    timeout_s: float

    @property
    def policy(self) -> str:
        """The engine policy identity pinned in every basis it generates over."""
        return reflecting.endpoint_policy(self.client.model)


@dataclass
class PendingReceipts:
    """The pending-receipt worker of one server and what it resolved."""

    db: Database
    reflector: Reflector
    idle_s: float = 1.0
    committed: int = 0
    failed: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def run_once(self) -> bool:
        """Resolve the oldest job no other server holds; False when none was free."""
        async with self.db.transaction() as conn:
            work = await pending.claim(conn)
            if work is None:
                return False
            outcome = await self._reflect(conn, work)
            await pending.finish(conn, work["receipt_id"], status=outcome.status,
                                 refs=outcome.refs, error_code=outcome.error_code,
                                 extensions=outcome.extensions)
        if outcome.status == "committed":
            self.committed += 1
        else:
            self.failed += 1
            log.info("pending receipt failed", extra={"receipt_id": str(work["receipt_id"]),
                                                      "error_code": outcome.error_code})
        return True

    async def _reflect(self, conn: Conn, work: dict[str, Any]) -> Outcome:
        space_id, subject_id = work["space_id"], work["payload"]["subject_id"]
        basis = ReflectionBasis(**work["payload"]["basis"])
        pinned = {r.record_id: r.revision for r in basis.records}
        found = await rows.records_by_id(conn, space_id, list(pinned))
        profiles = {p["kind"]: p for p in await listing.profiles(conn, space_id, subject_id)}
        moved = (len(found) != len(pinned)
                 or any(r["deleted_at"] is not None or r["revision"] != pinned[r["memory_id"]]
                        for r in found)
                 or {k: p["revision"] for k, p in profiles.items()} != basis.profile_revisions)
        if moved:
            return Outcome.failed("basis_changed", "a record or profile of the pinned basis "
                                  "changed before generation ran; generate again")
        ordered = sorted(found, key=lambda r: (r["created_at"], str(r["memory_id"])))
        messages = reflecting.prompt(subject_id, {k: p["text"] for k, p in profiles.items()},
                                     [r["text"] for r in ordered])
        started = time.monotonic()
        try:
            answer = await self.reflector.client.complete(messages,
                                                          timeout_s=self.reflector.timeout_s)
        except ChatError as exc:
            return Outcome.failed(exc.code, str(exc))
        cost = {"model": answer.model, "usage": answer.usage,
                "elapsed_ms": round((time.monotonic() - started) * 1000)}
        reflection_id = uuid.uuid4()
        await listing.insert_reflection(conn, {
            "reflection_id": reflection_id, "space_id": space_id, "subject_id": subject_id,
            "created_by": work["principal"], "text": reflecting.bounded(answer.text),
            "basis": basis.model_dump(mode="json"), "state_digest": reflecting.digest(basis)})
        return Outcome("committed", [str(reflection_id)], None, {"cost": cost})

    def wake(self) -> None:
        """Look for work now (a pending op just committed on this server)."""
        self._wake.set()

    def as_json(self) -> dict[str, object]:
        """Progress for capabilities."""
        return {"running": self.running, "endpoint": self.reflector.client.endpoint,
                "engine_policy": self.reflector.policy, "committed": self.committed,
                "failed": self.failed}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="spoke-pending-receipts")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def aclose(self) -> None:
        await tasks.stop((self._task,))
        self._task = None
        await self.reflector.client.aclose()

    async def _forever(self) -> None:
        while True:
            try:
                worked = await self.run_once()
            except (CortexError, OSError) as exc:  # the database comes back
                log.warning("pending receipt work failed: %s", type(exc).__name__)
                worked = False
            if worked:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.idle_s)
