"""Staged imports and exports expire (issue 37 item 16, ADR 0087).

Built at start-up (:func:`attested_cortex.server.assembling.open_services`), kept in
``Services.transfer_expiry`` and shown in capabilities (``spoke_memory.transfer_expiry``).
One bounded background task: every ``interval_s`` it discards imports still staging or
verified :data:`STAGED_RETENTION` after they were begun (their chunks dropped, as
``memory.imports.discard`` does) and drops exports with their chunks
:data:`EXPORT_RETENTION` after they were made, in one transaction
(:func:`attested_cortex.store.spoke.transfer.expire`). Their bytes counted against their
creator's storage quota until then (migration 0032), so an abandoned transfer costs its
creator a day at most. Replicas may sweep at once: the statements are idempotent. The
first sweep waits ``first_delay_s`` after start, so it never races a starting server's
first requests (nor those of replicas a rollout starts together).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from attested_cortex import tasks
from attested_cortex.errors import CortexError
from attested_cortex.store.database import Database
from attested_cortex.store.spoke import transfer as transfer

log = logging.getLogger(__name__)

#: How long a staged import may wait for its activation.
STAGED_RETENTION: Final = timedelta(hours=24)
#: How long an export's chunks are kept for fetching.
EXPORT_RETENTION: Final = timedelta(hours=24)


@dataclass
class TransferExpiry:
    """The expiry sweep of one server and what it last did."""

    db: Database
    interval_s: float = 300.0
    first_delay_s: float = 60.0
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    imports_expired: int = 0
    exports_expired: int = 0
    last_swept_at: datetime | None = None
    _loop: tasks.Loop | None = field(default=None, repr=False)

    async def sweep(self) -> tuple[int, int]:
        """One sweep: how many imports and exports expired."""
        now = self.clock()
        async with self.db.transaction() as conn:
            imports, exports = await transfer.expire(
                conn, staged_before=now - STAGED_RETENTION,
                exported_before=now - EXPORT_RETENTION)
        self.imports_expired += imports
        self.exports_expired += exports
        self.last_swept_at = now
        if imports or exports:
            log.info("expired staged imports and exports",
                     extra={"imports": imports, "exports": exports})
        return imports, exports

    def as_json(self) -> dict[str, Any]:
        """The stated retention and the sweep's progress, for capabilities."""
        return {"staged_import_retention_seconds": int(STAGED_RETENTION.total_seconds()),
                "export_retention_seconds": int(EXPORT_RETENTION.total_seconds()),
                "sweep_interval_seconds": self.interval_s, "running": self.running,
                "imports_expired": self.imports_expired,
                "exports_expired": self.exports_expired,
                "last_swept_at": None if self.last_swept_at is None
                else self.last_swept_at.isoformat().replace("+00:00", "Z")}

    def start(self) -> None:
        if self._loop is None:
            self._loop = tasks.Loop("spoke-transfer-expiry", self._pass, retry_s=self.interval_s,
                                    expected=(CortexError, OSError),
                                    first_delay_s=min(self.first_delay_s, self.interval_s))
        self._loop.start()

    @property
    def running(self) -> bool:
        return self._loop is not None and self._loop.running

    async def aclose(self) -> None:
        if self._loop is not None:
            await self._loop.stop()

    async def _pass(self) -> float:
        await self.sweep()
        return self.interval_s
