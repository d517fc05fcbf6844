"""What the deliverer's lanes share, so ten subscriptions cost the write path little more than
one (issue 41: at most 10 % at 10). Called by :mod:`.delivering` only.

The deliverer runs in the server's own event loop, beside the requests it must not slow. Per
batch, each lane used to read the outbox, re-read its state, build every event's body (open
the sealed payload, serialise the envelope) and commit its cursor with a disk flush: ten
subscriptions, ten of each per write. Here:

* :class:`Reads`: the outbox's tail is read once for every lane: a window of the latest
  events (every one in ``(low, high]``, each body built once), read again only when a commit
  was announced (NOTIFY) since the last read began, or the last read is older than the poll
  interval (the listener may be down). Sequence order is commit order (ADR 0106), so a read
  past ``high`` never misses an older commit. A lane further behind than the window (a
  replay, an outage) reads past its own cursor; lanes at the same cursor share that read,
  joining only one begun after their pass began (it sees every commit whose NOTIFY they could
  have missed).
* :class:`Rows`: lanes that re-read their state rows (after a replay, when idle) share one
  read of every row, so a hundred lanes going idle together take one pooled connection,
  not a hundred (the writes wait for the pool too).
* :class:`Gate`: at most a few attempts run at once across every lane (each counted for its
  first 100 ms only), so a turn of the event loop stays short and a write waits for a few
  deliveries, not for every one a hundred subscriptions have started.
* :class:`Cursors`: the cursor moves of lanes that finish a batch together go in one
  statement (group commit), committed without waiting for the disk: a cursor lost in a
  crash only re-delivers what the receivers deduplicate by ``webhook-id`` (at least once).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from attested_cortex import tasks
from attested_cortex.attest.sealing import UnsealError
from attested_cortex.store import outbox
from attested_cortex.store import subscriptions as subs
from attested_cortex.store.database import Database
from attested_cortex.store.outbox import Stored
from attested_cortex.store.subscriptions import Subscription

#: How many built bodies are kept, in batches (lanes a few batches apart still share).
_KEPT_BATCHES: Final = 4


@dataclass(frozen=True, slots=True)
class Ready:
    """An event and its delivered body (None when its sealed payload does not open: why)."""

    event: Stored
    text: str | None
    why: str = ""


class Reads:
    """The outbox's tail, read once for every lane; reads past older cursors shared."""

    def __init__(self, db: Database, batch: int, build: Callable[[Stored], str], *,
                 fresh_s: float) -> None:
        self._db, self._batch, self._build, self._fresh_s = db, batch, build, fresh_s
        #: Commits announced so far (NOTIFYs): a tail read begun before the last is stale.
        self.announced = 0
        # The window holds every event in (low, high], in order (None: no window yet).
        self._low: int | None = None
        self._high = 0
        self._window: list[Ready] = []
        self._fresh_as_of, self._fresh_at = -1, -1e9  # the last tail read that reached the end
        self._tail: asyncio.Task[None] | None = None
        self._reading: dict[int, tuple[float, asyncio.Task[list[Ready]]]] = {}
        self._built: dict[int, Ready] = {}

    def announce(self) -> None:
        """A commit appended events (its NOTIFY arrived): the tail must be read again."""
        self.announced += 1

    def behind(self, cursor: int) -> bool:
        """Whether events past ``cursor`` may be waiting (else a commit will announce them)."""
        return self._low is None or cursor < self._high or not self._fresh()

    async def after(self, cursor: int, since: float) -> list[Ready]:
        """Up to a batch of the events past ``cursor``, as of a read begun after ``since``
        (the loop time the asking lane's pass began) or since the last announced commit."""
        if self._low is None or cursor > self._high:
            self._restart(cursor)  # no window yet, or one behind a new subscription's cursor
        if cursor == self._high:
            await self._refreshed(cursor)
        assert self._low is not None
        if cursor < self._low:  # further behind than the window: its own read, shared
            return await self._past(cursor, since)
        first = bisect.bisect_right(self._window, cursor, key=lambda r: r.event.seq)
        return self._window[first:first + self._batch]

    def _fresh(self) -> bool:
        return (self._fresh_as_of == self.announced
                and asyncio.get_running_loop().time() - self._fresh_at < self._fresh_s)

    def _restart(self, cursor: int) -> None:
        self._low = self._high = cursor
        self._window = []
        self._fresh_as_of = -1

    async def _refreshed(self, cursor: int) -> None:
        """Read the tail until the window goes past ``cursor`` or holds every event
        committed before the read began (one tail read at a time, shared)."""
        loop = asyncio.get_running_loop()
        while cursor == self._high and not self._fresh():
            if self._tail is None or self._tail.done():
                self._tail = loop.create_task(self._read_tail(self.announced, loop.time()),
                                              name="webhook-outbox-tail")
            await asyncio.shield(self._tail)

    async def _read_tail(self, as_of: int, at: float) -> None:
        start = self._high
        async with self._db.connection() as conn:
            events = await outbox.after(conn, start, self._batch)
        if self._high != start:  # restarted meanwhile: this read is of another window
            return
        self._window.extend(self._ready(e) for e in events)
        if events:
            self._high = events[-1].seq
        if len(events) < self._batch:  # the end, as of the read's start
            self._fresh_as_of, self._fresh_at = as_of, at
        extra = len(self._window) - _KEPT_BATCHES * self._batch
        if extra > 0:
            self._low = self._window[extra - 1].event.seq
            del self._window[:extra]

    async def _past(self, cursor: int, since: float) -> list[Ready]:
        found = self._reading.get(cursor)
        if found is None or found[0] < since:
            loop = asyncio.get_running_loop()
            found = (loop.time(), loop.create_task(self._read(cursor),
                                                   name="webhook-outbox-read"))
            self._reading[cursor] = found
            found[1].add_done_callback(functools.partial(self._done, cursor, found))
        # shielded: a lane stopped while it waits must not cancel its neighbours' read
        return await asyncio.shield(found[1])

    def _done(self, cursor: int, found: tuple[float, asyncio.Task[list[Ready]]],
              _: object) -> None:
        if self._reading.get(cursor) is found:
            del self._reading[cursor]

    async def _read(self, cursor: int) -> list[Ready]:
        async with self._db.connection() as conn:
            events = await outbox.after(conn, cursor, self._batch)
        ready = [self._ready(e) for e in events]
        while len(self._built) > _KEPT_BATCHES * self._batch:
            del self._built[next(iter(self._built))]
        return ready

    def _ready(self, event: Stored) -> Ready:
        kept = self._built.get(event.seq)
        if kept is None:
            try:
                kept = Ready(event, self._build(event))
            except UnsealError as exc:  # not sent: kept, sealed, for an operator to look at
                kept = Ready(event, None, f"the payload does not open: {exc}")
            self._built[event.seq] = kept
        return kept

    async def aclose(self) -> None:
        await tasks.stop([self._tail, *(t for _, t in self._reading.values())])
        self._reading.clear()
        self._tail = None


@dataclass(frozen=True, slots=True)
class Move:
    """A lane's finished batch: its cursor from ``read`` to ``cursor``."""

    sub_id: uuid.UUID
    read: int
    cursor: int
    delivered: int
    success_at: datetime | None


class Cursors:
    """Cursor moves gathered into one statement while the previous one runs."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: dict[uuid.UUID, tuple[Move, asyncio.Future[bool]]] = {}
        self._writer: asyncio.Task[None] | None = None

    async def advance(self, move: Move) -> bool:
        """Move a cursor by compare-and-set; False when a replay moved it meanwhile."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self._pending[move.sub_id] = (move, done)
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write(), name="webhook-cursors")
        return await done

    async def _write(self) -> None:
        await asyncio.sleep(0)  # the lanes that finish in this turn of the loop join
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                async with self._db.transaction() as conn:
                    await conn.execute("SET LOCAL synchronous_commit TO off")
                    moved = await subs.advance_many(conn, [
                        (m.sub_id, m.read, m.cursor, m.delivered, m.success_at)
                        for m, _ in batch.values()])
            except Exception as exc:  # each lane's pass fails with it, and retries
                for _, done in batch.values():
                    if not done.done():
                        done.set_exception(exc)
                continue
            for sub_id, (_, done) in batch.items():
                if not done.done():
                    done.set_result(sub_id in moved)

    async def aclose(self) -> None:
        await tasks.stop([self._writer])
        for _, done in self._pending.values():
            done.cancel()
        self._pending.clear()


class Rows:
    """Every subscription's row, read once for the lanes that ask at the same time."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._reading: tuple[float, asyncio.Task[dict[uuid.UUID, Subscription]]] | None = None

    async def read(self, since: float) -> dict[uuid.UUID, Subscription]:
        """The rows by id, as of a read begun at or after ``since`` (loop time)."""
        found = self._reading
        if found is None or found[0] < since:
            loop = asyncio.get_running_loop()
            found = (loop.time(), loop.create_task(self._read(), name="webhook-rows"))
            self._reading = found
        return await asyncio.shield(found[1])

    async def _read(self) -> dict[uuid.UUID, Subscription]:
        async with self._db.connection() as conn:
            return {s.id: s for s in await subs.listed(conn)}

    async def aclose(self) -> None:
        if self._reading is not None:
            await tasks.stop([self._reading[1]])
        self._reading = None


class Gate:
    """At most ``size`` delivery attempts running at once across every lane, each counted
    only its first ``slow_s``: the event loop serving requests stays responsive however many
    subscriptions deliver (a hundred lanes, eight attempts each, made every turn of the loop
    run 800 callbacks and a write wait seconds), while a receiver that hangs holds its own
    lane's slots only (past ``slow_s`` its attempt waits on the network and uses no CPU)."""

    def __init__(self, size: int, slow_s: float) -> None:
        self._slots = asyncio.Semaphore(size)
        self._slow_s = slow_s

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self._slots.acquire()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._slots.release()

        timer = asyncio.get_running_loop().call_later(self._slow_s, release)
        try:
            yield
        finally:
            timer.cancel()
            release()
