"""The webhook deliverer: the outbox's first consumer (issue 41, ADR 0106/0107).

Runs in the server's delivery process (:mod:`attested_cortex.server.delivery`, ADR 0142: a
child at a lower CPU priority, so deliveries never take the write path's CPU), or, with
``subscriptions.delivery: in_process``, in the server's own loop (built by
:func:`attested_cortex.server.assembling.open_services` into ``Services.deliverer``); either
way the server sees it through :class:`Delivery`. One lane per enabled subscription, each a
task reading the outbox past the subscription's cursor in batches: a batch's events for the
subscription (its event names and namespace patterns; an event without a namespace, a link's,
goes to every subscription of its name) are grouped by key, each key's events delivered in
order by one chain, the chains of different keys at once (at most ``max_in_flight`` attempts
in flight, the lane's HTTP client holds no more connections). A failed attempt is retried
after the schedule's delays (1 s, 5 s, 25 s, then times the factor up to the cap); one that
exhausts its attempts goes to the dead-letter queue and the key's chain moves on. When every
chain of the batch is done the cursor moves past the batch in one transaction with the
batch's dead letters: a crash before that re-delivers the batch (at least once; every
delivery of an event carries the same ``webhook-id``, ``evt_<seq>``). The cursor moves by
compare-and-set, so a replay that moved it back meanwhile wins.

Lanes wake on the outbox's NOTIFY (sent at COMMIT) and poll as a fallback. They share what
does not depend on the subscription (:mod:`.fanout`): one outbox read for the lanes at the same
cursor, each body built once, the cursor moves of a turn in one statement, a gate of 16
attempts at once across all lanes (the requests' loop stays responsive); a lane keeps its
cursor in memory and re-reads its row when a pass finds nothing (a replay may have moved it)
or its compare-and-set fails. Every task is a :class:`attested_cortex.tasks.Loop` (bounded
stops, no lost cancellation). Nothing commits during start-up: the supervisor's first pass
waits ``first_delay_s``. The outbox keeps events
``retention_s``; a lane whose cursor falls behind what was dropped says so (status, metric).
Replicas each run lanes, but a lane delivers only while its process holds the
subscription's lease (:mod:`.leasing`, ADR 0131): one replica delivers each subscription, and
another takes over when it dies (the batch it had not finished is delivered again, same id).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from attested_cortex import tasks
from attested_cortex.attest.sealing import Sealer, UnsealError
from attested_cortex.errors import CortexError, NotFoundError
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.policy.targets import Network
from attested_cortex.service.pipeline.outboxing import open_secret, opened, seal_secret
from attested_cortex.service.workers.fanout import Cursors, Gate, Move, Reads, Ready, Rows
from attested_cortex.service.workers.leasing import Leases
from attested_cortex.service.workers.webhooks import Limits, Sender
from attested_cortex.store import outbox
from attested_cortex.store import subscriptions as subs
from attested_cortex.store.database import AnyConn, Database
from attested_cortex.store.notifications import listening
from attested_cortex.store.outbox import Stored, json_text
from attested_cortex.store.subscriptions import Subscription

log = logging.getLogger(__name__)
CHANNEL = "cortex_outbox"


@dataclass(frozen=True)
class DeliverySettings:
    """How the deliverer retries, bounds and keeps (``subscriptions`` in the settings)."""

    retry_schedule_s: tuple[float, ...] = (1.0, 5.0, 25.0)
    retry_factor: float = 5.0
    retry_cap_s: float = 600.0
    max_attempts: int = 10
    batch: int = 256
    retention_s: float = 7 * 86400.0
    allow_private: bool = False
    refused: tuple[Network, ...] = ()
    limits: Limits = field(default_factory=Limits)
    poll_s: float = 1.0
    #: How long a woken lane waits for the commits right behind the one that woke it.
    linger_s: float = 0.005
    #: How often the outbox's bounds (head, retention) are read for the gauges.
    bounds_s: float = 1.0
    sync_s: float = 1.0
    first_delay_s: float = 0.5
    sweep_s: float = 300.0
    #: Attempts running at once across every subscription, each counted for its first
    #: ``gate_slow_s`` only (:class:`.fanout.Gate`: the requests' event loop stays responsive).
    gate_size: int = 16
    gate_slow_s: float = 0.1
    #: How long an event whose sealed payload does not open waits for one more try before it
    #: becomes a dead letter (0: at once). A rotated master key ring is adopted by each
    #: process at its own poll (the server, its delivery process, other replicas: ADR 0142),
    #: so an event sealed under the new version may reach one that has not adopted it yet.
    reopen_after_s: float = 0.0
    #: Subscriptions declared in the configuration (the operator's CortexSubscriptions,
    #: ADR 0108), kept in the table as ``managed_by = 'config'``.
    declared: tuple[Declared, ...] = ()


@dataclass(frozen=True)
class Declared:
    """A subscription the configuration declares; its secret is read from a file (a
    mounted Secret) at each sync, so a rotated Secret takes effect without a restart."""

    name: str
    url: str
    events: tuple[str, ...]
    namespaces: tuple[str, ...]
    secret_file: Path
    max_in_flight: int = 4
    enabled: bool = True
    allow_private_targets: bool = False

    def fields(self) -> dict[str, Any]:
        """The row's fields (the secret read now)."""
        return {"name": self.name, "url": self.url, "events": list(self.events),
                "namespaces": list(self.namespaces),
                "secret": self.secret_file.read_text(encoding="utf-8").strip(),
                "max_in_flight": self.max_in_flight, "enabled": self.enabled,
                "allow_private_targets": self.allow_private_targets, "managed_by": "config"}


def delays(s: DeliverySettings) -> list[float]:
    """The wait after each failed attempt but the last: the schedule, then each the one
    before times the factor, all at most the cap."""
    out: list[float] = []
    for i in range(s.max_attempts - 1):
        wait = s.retry_schedule_s[i] if i < len(s.retry_schedule_s) else out[-1] * s.retry_factor
        out.append(min(wait, s.retry_cap_s))
    return out


def wanted(sub: Subscription, event: Stored) -> bool:
    """Whether ``event`` is for ``sub`` (its names, its namespace patterns)."""
    if event.event not in sub.events and "*" not in sub.events:
        return False
    return event.namespace is None or any(
        matches(parse_pattern(p), event.namespace) for p in sub.namespaces)


def body(event: Stored) -> str:
    """The delivered JSON (the Standard Webhooks envelope: type, timestamp, data), the same
    bytes at every attempt."""
    return json_text({
        "type": event.event, "timestamp": event.created_at.isoformat(),
        "sequence": event.seq, "key": event.key, "data": event.payload})


def message_id(seq: int) -> str:
    """The stable delivery id of an event (``webhook-id``)."""
    return f"evt_{seq}"


class Delivery(Protocol):
    """What the server asks of webhook delivery, wherever it runs: this event loop
    (:class:`Deliverer`, ``subscriptions.delivery: in_process``) or a child process
    (:class:`attested_cortex.server.delivery_process.DeliveryProcess`, ADR 0142)."""

    settings: DeliverySettings

    def start(self, dsn: str) -> None: ...

    async def aclose(self) -> None: ...

    @property
    def running(self) -> bool:
        """Whether delivery runs for this replica (its lanes, or its process, are up)."""
        ...

    @property
    def held(self) -> frozenset[uuid.UUID]:
        """The subscriptions this replica delivers now (their leases are held here)."""
        ...

    def changed(self) -> None:
        """A subscription was created, changed or deleted here: resync now."""

    def kick(self) -> None:
        """A replay moved a cursor back: re-read the rows now."""

    async def replay_dead(self, sub: Subscription, seq: int) -> str | None:
        """One attempt at a dead letter now (None: delivered, it left the queue)."""
        ...

    async def exposition(self) -> bytes:
        """Metrics kept outside the server's registry (the process's), as Prometheus text."""
        ...


def status_of(sub: Subscription, *, head: int, dropped_before: int,
              here: bool) -> dict[str, Any]:
    """A subscription's delivery state for the API and capabilities (no secret), from its
    row and the outbox's bounds (the database's, the same on every replica); ``running``
    says whether *this* replica delivers it (holds its lease, ADR 0131)."""
    return {"lag": max(0, head - sub.cursor), "cursor": sub.cursor,
            "head": head, "delivered": sub.delivered,
            "failed_attempts": sub.failed_attempts,
            "last_success_at": _iso(sub.last_success_at),
            "last_failure_at": _iso(sub.last_failure_at), "last_error": sub.last_error,
            "dead_letters": sub.dead_letters,
            "behind_retention": sub.cursor < dropped_before,
            "running": here}


async def statuses(conn: AnyConn, delivery: Delivery,
                   found: Sequence[Subscription]) -> list[dict[str, Any]]:
    """:func:`status_of` for each of ``found``, with one read of the outbox's bounds; which
    ones this replica delivers comes from ``delivery``, wherever it runs (ADR 0142)."""
    dropped, head = await outbox.bounds(conn)
    here = delivery.held
    return [status_of(s, head=head, dropped_before=dropped, here=s.id in here)
            for s in found]


def new_sender(settings: DeliverySettings, sub: Subscription) -> Sender:
    """A sender (HTTP client) for ``sub`` within the settings' bounds."""
    return Sender(max_in_flight=sub.max_in_flight,
                  allow_private=sub.allow_private_targets or settings.allow_private,
                  refused=settings.refused, limits=settings.limits)


async def replay_dead(db: Database, sealer: Sealer | None, sub: Subscription, seq: int,
                      sender: Sender) -> str | None:
    """One attempt at a dead letter now, with ``sender``: None when delivered (it leaves
    the queue), else why not (it stays, its attempts counted). The server runs it itself
    whichever process delivers (an operator's request, answered with its outcome)."""
    async with db.connection() as conn:
        dead = await subs.dead_letter(conn, sub.id, seq)
    if dead is None:
        raise NotFoundError(f"subscription {sub.name} has no dead letter {seq}",
                            code="dead_letter_not_found")
    event = Stored(dead.seq, dead.event, dead.key, None, dead.payload, dead.dead_at)
    why = await sender.send(sub.url, secret=open_secret(sealer, sub.name, sub.secret),
                            msg_id=message_id(seq),
                            body=body(replace(event, payload=opened(sealer, event.payload))))
    async with db.transaction() as conn:
        if why is None:
            await subs.forget_dead(conn, sub.id, seq)
        else:
            await subs.bury(conn, sub.id, seq=seq, event=dead.event, key=dead.key,
                            payload=dead.payload, attempts=1, error=why)
    return why


@dataclass
class _Tally:
    delivered: int = 0
    dead: list[tuple[Stored, int, str]] = field(default_factory=list)
    success_at: datetime | None = None


@dataclass
class _Lane:
    sub: Subscription
    sender: Sender
    slots: asyncio.Semaphore
    secret: str = ""  # opened once when the lane starts (sealed at rest: ADR 0106)
    loop: tasks.Loop | None = None
    #: Every event at or below it is done (None: not read yet); the row's, kept in memory.
    cursor: int | None = None
    #: The last pass found the lane caught up: the next one lingers for a burst's commits.
    idle: bool = True
    #: When its row was last read, and the deliverer's replay count then.
    refreshed_at: float = -1e9
    replays: int = 0


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.deliveries = Counter(
            "cortex_subscription_deliveries_total", "Webhook delivery attempts by outcome",
            ["subscription", "outcome"], registry=registry)
        self.lag = Gauge("cortex_subscription_lag_events",
                         "Outbox sequence numbers past a subscription's cursor",
                         ["subscription"], registry=registry)
        self.dead = Gauge("cortex_subscription_dead_letters",
                          "Events in a subscription's dead-letter queue", ["subscription"],
                          registry=registry)
        self.behind = Gauge("cortex_subscription_behind_retention",
                            "1 when the outbox dropped events a subscription had not had",
                            ["subscription"], registry=registry)


class Deliverer:
    """Every lane of one server, their supervisor and the outbox's retention sweep."""

    def __init__(self, db: Database, settings: DeliverySettings | None = None, *,
                 registry: CollectorRegistry | None = None, sealer: Sealer | None = None
                 ) -> None:
        self.db, self.settings = db, settings or DeliverySettings()
        #: Opens payloads sealed at rest (``encryption.at_rest``, ADR 0106).
        self.sealer = sealer
        self._delays = delays(self.settings)
        self._lanes: dict[uuid.UUID, _Lane] = {}
        self._reads = Reads(db, self.settings.batch, self.text, fresh_s=self.settings.poll_s)
        self._replays = 0  # kicks from here (a replay moved a cursor back)
        self._cursors = Cursors(db)
        self._rows = Rows(db)
        self._gate = Gate(self.settings.gate_size, self.settings.gate_slow_s)
        s = self.settings
        self._supervisor = tasks.Loop("webhook-supervisor", self._supervise, retry_s=s.sync_s,
                                      expected=(CortexError, OSError),
                                      first_delay_s=s.first_delay_s)
        self._listener: tasks.Loop | None = None
        self._swept_at = 0.0
        self._metrics = _Metrics(registry)
        self.dropped_before = 0  # the outbox's oldest sequence minus one
        self.head = 0
        self._bounds_at = -1e9
        #: One replica delivers each subscription (ADR 0131).
        self.leases = Leases[uuid.UUID](check_s=self.settings.poll_s)

    # -- life cycle --------------------------------------------------------------------
    def start(self, dsn: str) -> None:
        if self._listener is None:
            self.leases.bind(dsn)
            self._swept_at = asyncio.get_running_loop().time()  # first sweep an interval on
            self._listener = tasks.Loop("webhook-listener", functools.partial(self._listen, dsn),
                                        retry_s=self.settings.poll_s,
                                        expected=(CortexError, OSError))
            self._listener.start()
            self._supervisor.start()

    @property
    def running(self) -> bool:
        return self._supervisor.running

    async def aclose(self) -> None:
        loops = [self._supervisor, *([self._listener] if self._listener else []),
                 *(lane.loop for lane in self._lanes.values() if lane.loop is not None)]
        await asyncio.gather(*(loop.stop() for loop in loops))
        await self._reads.aclose()
        await self._cursors.aclose()
        await self._rows.aclose()
        for lane in self._lanes.values():
            await lane.sender.close()
        self._lanes.clear()
        self._listener = None
        await self.leases.aclose()

    def changed(self) -> None:
        """A subscription was created, changed or deleted here: resync now."""
        self._supervisor.wake()
        self.kick()

    def kick(self) -> None:
        """Wake every lane to re-read its row (a replay moved its cursor back)."""
        self._replays += 1
        self._wake_lanes()

    def _announced(self) -> None:
        """A commit appended events (its NOTIFY): wake every lane."""
        self._reads.announce()
        self._wake_lanes()

    def _wake_lanes(self) -> None:
        for lane in self._lanes.values():
            if lane.loop is not None:
                lane.loop.wake()

    # -- supervision -------------------------------------------------------------------
    async def _listen(self, dsn: str) -> float:
        """Hold the LISTEN connection until it is lost (the loop logs why; lanes poll until
        it is back)."""
        async with listening(dsn, CHANNEL) as notes:
            async for _ in notes:
                self._announced()
        return self.settings.poll_s

    async def _supervise(self) -> float:
        await self.sync()
        now = asyncio.get_running_loop().time()
        if now - self._swept_at >= self.settings.sweep_s:
            await self.sweep()
            self._swept_at = now
        return self.settings.sync_s

    async def sync(self) -> None:
        """Start a lane per enabled subscription, restart those whose target changed, stop
        the rest."""
        if self.settings.declared:
            await self.sync_declared()
        async with self.db.connection() as conn:
            found = {s.id: s for s in await subs.listed(conn) if s.enabled}
            self.dropped_before, self.head = await outbox.bounds(conn)
        for sub_id in [i for i in self._lanes if i not in found]:
            await self._stop_lane(sub_id)
        for sub in found.values():
            lane = self._lanes.get(sub.id)
            if lane is not None and lane.sub.updated_at == sub.updated_at:
                continue
            if lane is not None:
                await self._stop_lane(sub.id)
            await self._start_lane(sub)

    async def sync_declared(self) -> int:
        """Create, change or delete the ``config`` subscriptions to match the declared ones;
        how many rows changed (none when they match: an idle server writes nothing). A
        declared name taken by an API subscription is left alone, and logged."""
        wanted: dict[str, dict[str, Any]] = {}
        for one in self.settings.declared:
            try:
                wanted[one.name] = one.fields()
            except OSError as exc:
                log.error("declared subscription %s: its secret file is unreadable (%s)",
                          one.name, type(exc).__name__)
        changed = 0
        async with self.db.transaction() as conn:
            current = {s.name: s for s in await subs.listed(conn)}
            for name, fields in wanted.items():
                row = current.get(name)
                if row is None:
                    await subs.create(conn, {
                        **fields, "secret": seal_secret(self.sealer, name, fields["secret"])})
                elif row.managed_by != "config":
                    log.error("declared subscription %s: the name is taken by one made "
                              "through the API; not managed", name)
                    continue
                elif _differs(row, fields, self.sealer):
                    await subs.update(conn, row.id, {
                        **fields, "secret": seal_secret(self.sealer, name, fields["secret"])})
                else:
                    continue
                changed += 1
            for name, row in current.items():
                if row.managed_by == "config" and name not in wanted:
                    await subs.delete(conn, row.id)
                    changed += 1
        return changed

    async def _start_lane(self, sub: Subscription) -> None:
        s = self.settings
        sender = new_sender(s, sub)
        try:
            secret = open_secret(self.sealer, sub.name, sub.secret)
        except UnsealError as exc:  # its events wait; the next sync tries again
            log.error("subscription %s: its secret does not open (%s)", sub.name, exc)
            await sender.close()
            return
        lane = _Lane(sub, sender, asyncio.Semaphore(sub.max_in_flight), secret)
        lane.loop = tasks.Loop(f"webhook-{sub.name}", functools.partial(self._pass, lane),
                               retry_s=s.poll_s, expected=(CortexError, OSError))
        lane.loop.start()
        self._lanes[sub.id] = lane

    async def _stop_lane(self, sub_id: uuid.UUID) -> None:
        lane = self._lanes.pop(sub_id)
        if lane.loop is not None:
            await lane.loop.stop()
        await lane.sender.close()
        await self.leases.release(sub_id)
        for gauge in (self._metrics.lag, self._metrics.dead, self._metrics.behind):
            with contextlib.suppress(KeyError):
                gauge.remove(lane.sub.name)

    async def sweep(self) -> int:
        """Drop the events older than the retention bound; how many."""
        before = datetime.now(UTC) - timedelta(seconds=self.settings.retention_s)
        async with self.db.transaction() as conn:
            dropped = await outbox.drop_before(conn, before)
        if dropped:
            log.info("outbox events dropped by retention", extra={"events": dropped})
        return dropped

    # -- a lane ------------------------------------------------------------------------
    async def _pass(self, lane: _Lane) -> float:
        """Deliver the next batch; how long to wait for a wake before the next pass."""
        loop = asyncio.get_running_loop()
        since = loop.time()
        if lane.idle:  # woken by a commit: let the commits right behind it land, so a
            # burst of writes is one batch (a few queries for many events), not one each
            await asyncio.sleep(self.settings.linger_s)
        if not await self.leases.holds(lane.sub.id):
            # another replica delivers this subscription (ADR 0131) and moves its cursor:
            # read it afresh when this one takes the lease over
            lane.cursor = None
            return self.settings.poll_s
        if lane.cursor is None and not await self._refresh(lane):
            return self.settings.poll_s
        assert lane.cursor is not None
        read = lane.cursor
        ready = await self._reads.after(read, since)
        await self._bounds()
        if not ready:
            lane.idle = True
            # nothing new: a replay may have moved the cursor back (here: a kick; on a
            # replica: seen within the poll interval)
            stale = (lane.replays != self._replays
                     or loop.time() - lane.refreshed_at >= self.settings.poll_s)
            return 0.0 if stale and await self._refresh(lane) and lane.cursor != read \
                else self.settings.poll_s
        lane.idle = False
        last = ready[-1].event.seq
        self.head = max(self.head, last)
        tally = _Tally()
        chains: dict[str, list[Ready]] = {}
        for one in ready:
            if wanted(lane.sub, one.event):
                chains.setdefault(one.event.key, []).append(one)
        await asyncio.gather(*(self._chain(lane, chain, tally) for chain in chains.values()))
        move = Move(lane.sub.id, read, last, tally.delivered, tally.success_at)
        if tally.dead:
            moved = await self._bury(lane, move, tally)
        else:
            moved = await self._cursors.advance(move)
        if not moved:  # a replay moved the cursor meanwhile: deliver from there
            await self._refresh(lane)
            return 0.0
        lane.cursor = last
        if tally.dead:
            await self._refresh(lane)  # the gauges count the new dead letters
        self._metrics.lag.labels(lane.sub.name).set(max(0, self.head - last))
        # caught up with the tail as read after the last announced commit: the next commit
        # wakes the lane
        return 0.0 if self._reads.behind(last) else self.settings.poll_s

    async def _refresh(self, lane: _Lane) -> bool:
        """Re-read the lane's row (its cursor; the gauges); False when it is gone."""
        replays, at = self._replays, asyncio.get_running_loop().time()
        state = (await self._rows.read(at)).get(lane.sub.id)
        if state is None:
            return False
        lane.cursor = state.cursor
        lane.refreshed_at, lane.replays = at, replays
        self._gauge(state)
        return True

    async def _bounds(self) -> None:
        """The outbox's bounds for the gauges and the status: at most once a second."""
        now = asyncio.get_running_loop().time()
        if now - self._bounds_at < self.settings.bounds_s:
            return
        self._bounds_at = now
        async with self.db.connection() as conn:
            dropped, head = await outbox.bounds(conn)
        self.dropped_before, self.head = dropped, max(self.head, head)

    async def _bury(self, lane: _Lane, move: Move, tally: _Tally) -> bool:
        """The batch's dead letters and its cursor move in one transaction."""
        async with self.db.transaction() as conn:
            for event, attempts, why in tally.dead:
                await subs.bury(conn, lane.sub.id, seq=event.seq, event=event.event,
                                key=event.key, payload=event.payload, attempts=attempts,
                                error=why)
            moved = await subs.advance_many(conn, [
                (move.sub_id, move.read, move.cursor, move.delivered, move.success_at)])
        log.warning("events dead-lettered", extra={"subscription": lane.sub.name,
                                                    "events": len(tally.dead)})
        return lane.sub.id in moved

    def _gauge(self, state: Subscription) -> None:
        name = state.name
        self._metrics.lag.labels(name).set(max(0, self.head - state.cursor))
        self._metrics.dead.labels(name).set(state.dead_letters)
        self._metrics.behind.labels(name).set(int(state.cursor < self.dropped_before))

    async def _chain(self, lane: _Lane, chain: Sequence[Ready], tally: _Tally) -> None:
        for one in chain:
            await self._event(lane, one, tally)

    def text(self, event: Stored) -> str:
        """The delivered body of ``event``, its payload opened when it was sealed at rest."""
        return body(replace(event, payload=opened(self.sealer, event.payload)))

    async def _event(self, lane: _Lane, one: Ready, tally: _Tally) -> None:
        name, event, text = lane.sub.name, one.event, one.text
        if text is None and self.settings.reopen_after_s > 0:
            # perhaps sealed under a key version this process adopts at its next poll of
            # the ring: try once more after it (the key's chain waits meanwhile)
            await asyncio.sleep(self.settings.reopen_after_s)
            with contextlib.suppress(UnsealError):
                text = self.text(event)
        if text is None:  # not sent: kept, sealed, for an operator to look at
            tally.dead.append((event, 0, one.why))
            self._metrics.deliveries.labels(name, "dead").inc()
            return
        for attempt, wait in enumerate([*self._delays, None], start=1):
            async with lane.slots, self._gate.slot():
                why = await lane.sender.send(lane.sub.url, secret=lane.secret,
                                             msg_id=message_id(event.seq), body=text)
            if why is None:
                tally.delivered += 1
                tally.success_at = datetime.now(UTC)
                self._metrics.deliveries.labels(name, "delivered").inc()
                return
            self._metrics.deliveries.labels(name, "failed").inc()
            await self._note_failure(lane, why)
            if wait is None:
                tally.dead.append((event, attempt, why))
                self._metrics.deliveries.labels(name, "dead").inc()
                return
            await asyncio.sleep(wait)

    async def _note_failure(self, lane: _Lane, why: str) -> None:
        try:
            async with self.db.transaction() as conn:
                await subs.note_failure(conn, lane.sub.id, at=datetime.now(UTC), error=why)
        except CortexError as exc:  # the state is a report; the retries go on
            log.warning("could not record a failed delivery: %s", type(exc).__name__)

    # -- the dead-letter queue ---------------------------------------------------------
    async def replay_dead(self, sub: Subscription, seq: int) -> str | None:
        """One attempt at a dead letter now (:func:`replay_dead`), with the lane's client
        when the subscription has a lane here."""
        lane = self._lanes.get(sub.id)
        if lane is not None:
            return await replay_dead(self.db, self.sealer, sub, seq, lane.sender)
        sender = new_sender(self.settings, sub)
        try:
            return await replay_dead(self.db, self.sealer, sub, seq, sender)
        finally:
            await sender.close()

    @property
    def held(self) -> frozenset[uuid.UUID]:
        """The subscriptions delivered here: their leases (every lane's when unbound)."""
        if not self.leases.bound:
            return frozenset(self._lanes)
        return self.leases.held

    async def exposition(self) -> bytes:
        """Nothing: in this process the gauges are in the server's own registry."""
        return b""


def _differs(row: Subscription, fields: dict[str, Any], sealer: Sealer | None) -> bool:
    try:
        secret = open_secret(sealer, row.name, row.secret)
    except UnsealError:
        return True  # rewritten under the key this server holds
    current = {**{k: getattr(row, k) for k in fields}, "secret": secret}
    return any(current[k] != (tuple(v) if isinstance(v, list) else v)
               for k, v in fields.items())


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
