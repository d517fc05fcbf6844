"""Reloading the master key ring while the server runs (ADR 0066): rotation needs no restart.

Started at start-up when the ring comes from a directory (the operator's mounted
``<cortex>-master-key`` Secret, ``master_key.dir``). One bounded background task polls the
directory every ``master_key.reload_interval_ms`` (a ``readlink`` of the volume's ``..data``
link; the files are read only when it changed) off the event loop, and adopts a changed ring
on the loop (:meth:`attested_cortex.attest.ringwatch.RingSource.adopt`): the next transcript,
held request and audit MAC are sealed under the new ``current`` version, rows under older
versions keep opening, and the re-sealing worker moves them on its next pass. A poll that
fails (the volume briefly unreadable) is logged and retried; it never stops the server.

A changed ring is first compared with the key versions the cortex recorded (ADR 0088,
:mod:`attested_cortex.store.key_checks`): one whose version names another key than the
recorded one is refused like a ring that does not load (the ring in use is kept; the
refusal is in capabilities); an adopted ring's new versions are recorded, so a later start
or replica with another key under that label is refused too.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from attested_cortex import tasks
from attested_cortex.attest.masterkeys import unlike_recorded
from attested_cortex.attest.ringwatch import RingSource
from attested_cortex.store import key_checks
from attested_cortex.store.database import Database

log = logging.getLogger(__name__)


@dataclass
class RingReloader:
    """The poll loop of one server's :class:`RingSource`."""

    source: RingSource
    interval_s: float = 5.0
    #: Where the cortex's key versions are recorded (None: nothing compared or recorded).
    db: Database | None = None
    _loop: tasks.Loop | None = field(default=None, repr=False)

    async def reload_once(self) -> bool:
        """One poll; whether a new ring was adopted."""
        new = await asyncio.to_thread(self.source.poll)
        if new is None:
            return False
        if self.db is not None:
            fingerprints = {v: new.keys[v].fingerprint for v in new.versions}
            async with self.db.connection() as conn:
                why = unlike_recorded(new, await key_checks.recorded(conn) or {})
                if why is None:
                    why = unlike_recorded(new, await key_checks.record(conn, fingerprints) or {})
            if why is not None:
                self.source.refuse(why)
                return False
        self.source.adopt(new)  # on the event loop, between awaits
        return True

    def start(self) -> None:
        if not self.source.watching:
            return
        if self._loop is None:  # the first poll one interval after start, as every other
            self._loop = tasks.Loop("master-key-reloader", self._pass, retry_s=self.interval_s,
                                    expected=(OSError,), first_delay_s=self.interval_s)
        self._loop.start()

    async def aclose(self) -> None:
        if self._loop is not None:
            await self._loop.stop()

    async def _pass(self) -> float:
        """One poll; an OSError (the volume briefly unreadable) is retried at the next."""
        await self.reload_once()
        return self.interval_s
