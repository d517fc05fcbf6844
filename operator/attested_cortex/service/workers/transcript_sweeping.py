"""The server's transcript state: the retention policy and the sweeper that applies it.

:class:`Transcripts` is built at start-up (:func:`attested_cortex.server.assembling.open_services`)
and kept in ``Services.transcripts``. Its sweeper is one bounded background task: every
``sweep_interval_s`` it archives, namespace by namespace, transcripts older than their
namespace's retention, then prunes the frames of those archived ``prune_after_days`` ago,
each step at most ``sweep_batch`` rows per run so one pass never holds a long transaction.
The clock is injectable (``clock``), so tests drive the lifecycle across days without
waiting; :meth:`Transcripts.sweep` is also callable directly. Every archive and prune appends
its ``transcript.archived``/``transcript.pruned`` write record in the batch's transaction
(signed by the server's ``audit_signer`` when it has one: ``audit_key``), so the deep audit
tells a pruned frame from one removed behind the server. A row that no longer matches its
previous record (changed behind the server) is neither archived nor pruned: its new record
would sign the change into the chain and launder it. The sweeper skips it from then on,
logs it and lists it in capabilities (``transcripts.sweeper.last.refused``); the deep audit
keeps naming it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from attested_cortex import tasks
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import TranscriptEvent
from attested_cortex.errors import CortexError
from attested_cortex.service.pipeline.write_records import record_sweep, split_recorded
from attested_cortex.store import transcripts as rows
from attested_cortex.store.database import Conn, Database
from attested_cortex.transcripts.retention import Retention

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


#: How many refused transcript ids capabilities list.
REFUSED_SHOWN = 20


@dataclass(frozen=True)
class SweepReport:
    """What one sweep did, and when (by the sweeper's clock)."""

    at: datetime
    archived: int
    pruned: int
    #: Every transcript the sweeper refused since start-up: changed behind the server.
    refused: tuple[uuid.UUID, ...] = ()

    def as_json(self) -> dict[str, object]:
        """For capabilities (at most :data:`REFUSED_SHOWN` ids; the count is whole)."""
        shown = sorted(str(i) for i in self.refused)[:REFUSED_SHOWN]
        return {"at": self.at.isoformat(), "archived": self.archived, "pruned": self.pruned,
                "refused": {"count": len(self.refused), "ids": shown}}


@dataclass
class Transcripts:
    """Retention policy, clock and sweeper of one server."""

    db: Database
    retention: Retention
    clock: Callable[[], datetime] = utc_now
    #: The key that signs sweep records (the ``audit_signer``'s, looked up at each sweep).
    audit_key: Callable[[], AgentKey | None] | None = None
    last_sweep: SweepReport | None = None
    #: Transcripts changed behind the server: never archived or pruned by this sweeper.
    refused: set[uuid.UUID] = field(default_factory=set)
    _loop: tasks.Loop | None = field(default=None, repr=False)

    async def sweep(self) -> SweepReport:
        """Archive what outlived its retention, then prune what was archived long enough."""
        now, batch = self.clock(), self.retention.sweep_batch
        async with self.db.connection() as conn:
            namespaces = await rows.live_namespaces(conn)
        cutoffs: dict[datetime, list[str]] = {}
        for namespace in namespaces:
            cutoff = self.retention.archive_before(namespace, now)
            if cutoff is not None:
                cutoffs.setdefault(cutoff, []).append(namespace)
        key = self.audit_key() if self.audit_key is not None else None
        async with self.db.transaction() as conn:
            found: list[rows.Recorded] = []
            for cutoff, group in cutoffs.items():
                found += await rows.to_archive(conn, namespaces=group, created_before=cutoff,
                                               limit=batch, skip=list(self.refused))
            due = await self._unchanged(conn, ("transcript.stored", "transcript.resealed"),
                                        found)
            done = await rows.archive(conn, due, now=now) if due else []
            await record_sweep(conn, "transcript.archived", done, key)  # last: the chain lock
            archived = len(done)
        async with self.db.transaction() as conn:
            found = await rows.to_prune(conn, archived_before=self.retention.prune_before(now),
                                        limit=batch, skip=list(self.refused))
            due = await self._unchanged(conn, ("transcript.archived", "transcript.resealed"),
                                        found)
            done = await rows.prune(conn, due, now=now) if due else []
            await record_sweep(conn, "transcript.pruned", done, key)
            pruned = len(done)
        self.last_sweep = SweepReport(now, archived, pruned, tuple(self.refused))
        if archived or pruned:
            log.info("transcripts swept", extra={"archived": archived, "pruned": pruned})
        return self.last_sweep

    async def _unchanged(self, conn: Conn, previous: tuple[TranscriptEvent, ...],
                         found: list[rows.Recorded]) -> list[uuid.UUID]:
        """The ids of ``found`` that still match their previous record; the others are
        refused (skipped from now on) and logged."""
        unchanged, changed = await split_recorded(conn, previous, found)
        for row in changed:
            self.refused.add(row.transcript.id)
            log.warning("transcript changed behind the server: not swept, its record not "
                        "extended (see cortexctl audit verify --deep)",
                        extra={"transcript_id": str(row.transcript.id)})
        return [r.transcript.id for r in unchanged]

    def start(self) -> None:
        """Run the sweeper in the background (where anything can expire: transcripts on, or a
        cortex-wide retention left for those stored before they were turned off)."""
        keeps = self.retention.enabled or self.retention.default_retention_days is not None
        if not keeps:
            return
        if self._loop is None:
            self._loop = tasks.Loop("transcripts-sweeper", self._pass,
                                    retry_s=self.retention.sweep_interval_s,
                                    expected=(CortexError, OSError))
        self._loop.start()

    @property
    def running(self) -> bool:
        """Whether the background sweeper runs."""
        return self._loop is not None and self._loop.running

    async def aclose(self) -> None:
        """Stop the sweeper."""
        if self._loop is not None:
            await self._loop.stop()

    async def _pass(self) -> float:
        await self.sweep()
        return self.retention.sweep_interval_s
