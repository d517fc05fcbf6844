"""Re-sealing transcript frames and memories under the current master key version (ADR
0056, rotation; ADR 0065 for memories).

Built at start-up when the server has a master key (:func:`attested_cortex.server.assembling.
open_services`), kept in ``Services.resealer``. One bounded background task: each pass takes
at most ``batch`` frames sealed under an older version (and, with ``encryption.at_rest`` on,
frames not sealed at all), locked ``FOR UPDATE SKIP LOCKED`` so replicas share the work,
opens each under its version, seals it under the current one and writes bytes and version in
one UPDATE, appending a ``transcript.resealed`` write record per row in the same
transaction (the frame's digest changed; the deep audit follows the latest record). Every
row is readable at every moment: a reader sees it before or after its one UPDATE, and the
ring holds both versions. A row that no longer matches its latest record (changed behind the
server) or does not open is never re-sealed (that would launder the change into the chain):
it is skipped from then on, logged, and counted in capabilities. Passes repeat without pause
while work remains, ``pause_s`` apart; idle, every ``idle_s``.

Memories (with ``encryption.at_rest`` on) go the same way, a batch per pass after the
frames': live rows under an older version, and plain ones, are opened, sealed under the
current version with their search tokens keyed under it, and written in one UPDATE
(:mod:`attested_cortex.store.memory_resealing`), with a ``memory.resealed`` record per
row in the same transaction (a sealed memory's record covers its sealed value). As for
frames, a memory that no longer matches one of its records, or does not open, is never
re-sealed: skipped, logged and counted.

A version may leave the Secret once capabilities'
``encryption.transcript_frames_by_key_version`` and ``memories_by_key_version`` no longer
list it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from attested_cortex import tasks
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import TRANSCRIPT_EVENTS
from attested_cortex.attest.sealing import Sealer, UnsealError
from attested_cortex.errors import CortexError
from attested_cortex.service.pipeline.write_records import (
    record_resealed,
    record_sweep,
    split_recorded,
    split_recorded_memories,
)
from attested_cortex.store import memory_resealing
from attested_cortex.store import transcripts as rows
from attested_cortex.store.database import Database

log = logging.getLogger(__name__)


@dataclass
class Resealer:
    """The re-sealing worker of one server and its progress."""

    db: Database
    sealer: Sealer
    batch: int = 200
    pause_s: float = 0.05
    idle_s: float = 30.0
    #: The key that signs the records (the ``audit_signer``'s, looked up at each pass).
    audit_key: Callable[[], AgentKey | None] | None = None
    resealed: int = 0
    #: Rows never re-sealed: changed behind the server, or not opening under their version.
    refused: set[uuid.UUID] = field(default_factory=set)
    memories_resealed: int = 0
    #: Memories never re-sealed: not opening under their version.
    memories_refused: set[uuid.UUID] = field(default_factory=set)
    _loop: tasks.Loop | None = field(default=None, repr=False)

    async def reseal_once(self) -> int:
        """One batch of frames and one of memories; how many rows it handled."""
        return await self._frames_once() + await self._memories_once()

    async def _memories_once(self) -> int:
        if not self.sealer.seals:  # at_rest off: memories stay as they are
            return 0
        key = self.audit_key() if self.audit_key is not None else None
        async with self.db.transaction() as conn:
            found = await memory_resealing.to_reseal(
                conn, current=self.sealer.version, plain=True, limit=self.batch,
                skip=list(self.memories_refused))
            unchanged, changed = await split_recorded_memories(
                conn, [m for m in found if not m.unreadable])
            refused = [m.id for m in found if m.unreadable] + [m.id for m in changed]
            done = await memory_resealing.reseal(conn, unchanged)
            await record_resealed(conn, done, key)  # last: the chain lock
        for mid in refused:
            self.memories_refused.add(mid)
            log.warning("memory not re-sealed: changed behind the server or not opening "
                        "under its key version (see cortexctl audit verify --deep)",
                        extra={"memory_id": str(mid)})
        self.memories_resealed += len(done)
        return len(done) + len(refused)

    async def _frames_once(self) -> int:
        version = self.sealer.version
        key = self.audit_key() if self.audit_key is not None else None
        async with self.db.transaction() as conn:
            found = await rows.to_reseal(conn, current=version, plain=self.sealer.seals,
                                         limit=self.batch, skip=list(self.refused))
            frames = dict((r.transcript.id, frame) for r, frame in found)
            unchanged, changed = await split_recorded(
                conn, TRANSCRIPT_EVENTS, [r for r, _ in found])
            refused = [r.transcript.id for r in changed]
            fresh: list[tuple[uuid.UUID, bytes]] = []
            for row in unchanged:
                t = row.transcript
                try:
                    plain = (frames[t.id] if t.key_version is None else
                             self.sealer.open("transcripts", t.id, t.key_version, frames[t.id]))
                except UnsealError:
                    refused.append(t.id)
                    continue
                # Under the version read at the start: the ring may be reloaded meanwhile.
                fresh.append((t.id, self.sealer.seal("transcripts", t.id, plain, version)[1]))
            done = await rows.reseal(conn, fresh, version)
            await record_sweep(conn, "transcript.resealed", done, key)  # last: the chain lock
        for tid in refused:
            self.refused.add(tid)
            log.warning("transcript not re-sealed: changed behind the server or not opening "
                        "under its key version (see cortexctl audit verify --deep)",
                        extra={"transcript_id": str(tid)})
        self.resealed += len(done)
        return len(done) + len(refused)

    def as_json(self) -> dict[str, object]:
        """Progress for capabilities."""
        return {"running": self.running, "target_version": self.sealer.version,
                "seals_plain": self.sealer.seals, "resealed": self.resealed,
                "refused": len(self.refused), "batch": self.batch,
                "memories_resealed": self.memories_resealed,
                "memories_refused": len(self.memories_refused)}

    def start(self) -> None:
        if self._loop is None:
            self._loop = tasks.Loop("transcripts-resealer", self._pass, retry_s=self.idle_s,
                                    expected=(CortexError, OSError))
        self._loop.start()

    @property
    def running(self) -> bool:
        return self._loop is not None and self._loop.running

    async def aclose(self) -> None:
        if self._loop is not None:
            await self._loop.stop()

    async def _pass(self) -> float:
        """One batch; a database error waits ``idle_s`` (the database comes back)."""
        worked = await self.reseal_once()
        return self.pause_s if worked else self.idle_s

