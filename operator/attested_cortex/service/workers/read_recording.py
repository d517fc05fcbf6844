"""Read records appended behind the answers, in batches (issue 40; docs/attestation.md,
"Read records").

Built at start-up when the server records reads (``audit.record_reads`` with an audit
signer) and kept as ``Services.access_sink``'s owner. A read's ``memory.access`` statement
is signed at once (by the audit signer's current key) and queued; one background task
appends what is queued in one transaction per batch (``append_many``: one round trip),
at most every ``interval_s``. A read's answer so waits for no chain append (one append per
read, under the chain lock the writes share, cost 2 to 5 ms at recall's p50 and p95). The
queue is bounded: when full, a read waits for room (records are never dropped). The price:
a server killed between a read and the next flush loses those records (at most one
interval's); a stopped server flushes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from attested_cortex import tasks
from attested_cortex.attest import cbor
from attested_cortex.attest.loading import KeySource
from attested_cortex.attest.signing import sign
from attested_cortex.errors import CortexError
from attested_cortex.service.pipeline.attesting import snapshot
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.service.pipeline.recording import statement
from attested_cortex.store import events
from attested_cortex.store.database import Database
from attested_cortex.store.events import PendingEvent
from attested_cortex.types import AgentId

log = logging.getLogger(__name__)


class ReadRecorder:
    """Queues signed ``memory.access`` statements and appends them in batches."""

    def __init__(self, db: Database, keys: KeySource, signer_id: str, *,
                 batch: int = 256, interval_s: float = 0.05, bound: int = 10_000) -> None:
        self.db = db
        self.keys = keys
        self.signer_id = signer_id
        self.batch = batch
        self.interval_s = interval_s
        self._queue: asyncio.Queue[PendingEvent] = asyncio.Queue(bound)
        self._loop = tasks.Loop("audit-read-records", self._pass, retry_s=interval_s)

    async def record(self, caller: Caller, spec: OperationSpec | None,
                     record: dict[str, Any]) -> None:
        """Sign the statement now and queue it (the pipeline's access sink)."""
        signer = snapshot(self.keys).signing_keys.get(AgentId(self.signer_id))
        if signer is None:
            log.error("audit_signer %s has no mounted private key; read record not chained",
                      self.signer_id, extra={"operation": record.get("operation")})
            return
        kind, body = statement(caller, record)
        payload = cbor.encode(body)
        await self._queue.put(PendingEvent(self.signer_id, kind, payload, sign(signer, payload),
                                           signer.public.fingerprint))

    def start(self) -> None:
        """Start the appending task."""
        self._loop.start()

    async def aclose(self) -> None:
        """Stop the task, then append what is still queued."""
        await self._loop.stop()
        with contextlib.suppress(CortexError):
            while not self._queue.empty():
                await self._flush()

    async def _pass(self) -> float:
        """Wait for a statement, then append it with those a burst queued meanwhile."""
        first = await self._queue.get()
        await asyncio.sleep(self.interval_s)  # let a burst gather into one append
        try:
            await self._flush(first)
        except CortexError as exc:
            log.error("read records not chained: %s", exc.message, extra={"code": exc.code})
        return 0.0

    async def _flush(self, first: PendingEvent | None = None) -> None:
        pending = [] if first is None else [first]
        while len(pending) < self.batch and not self._queue.empty():
            pending.append(self._queue.get_nowait())
        if pending:
            async with self.db.transaction() as conn:
                await events.append_many(conn, pending)
