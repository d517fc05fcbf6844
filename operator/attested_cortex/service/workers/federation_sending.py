"""Outbound federation: this cortex's changes sent to each peer from the transactional outbox
(issue 42, docs/federation.md, docs/adr/0132). Built by the server
(:mod:`attested_cortex.server.federation_client`) when ``federation`` has peers; the webhook
deliverer (:mod:`.delivering`) reads the same outbox beside it and neither affects the other.

One :class:`~attested_cortex.tasks.Loop` per peer, each with its own cursor
(``federation_cursors``, read once, then kept in memory as it moves it): a pass reads the
outbox past the cursor, lets the injected
:data:`Encode` turn the events meant for the peer into wire changes (its ``send`` patterns,
changes made here, signed fields looked up), numbers each with its outbox ``seq`` (strictly
increasing, the same after a restart, so the receiver's high-water mark refuses a resend),
gives it a correlation id (:func:`correlation_id`, the same for every retry, replica and
restart) and an ``expires_at``, and POSTs the batch through the injected
:data:`Transport` (mTLS, bounded).

The receiver answers per change after its commit. The cursor moves past every change
answered ``accepted`` up to the first one that is not (``retry``, ``expired``: re-sent as
a fresh copy), so the batch is cut there and the order of every object is the order of
the outbox. No answer (peer down, partition, timeout) leaves the cursor where it is: the
outbox holds the backlog, which drains in order when the peer answers again. Retries wait
1, 5 and 25 s, then double up to ``backoff_max_s``; hearing from the peer (its own batch
arrived here) cuts the wait short, so both sides of a healed partition catch up at once.
New events wake an idle peer's loop through the outbox's NOTIFY, never one backing off.

Replicas of one cortex share its database; a loop sends only while this process holds the
peer's lease (a session advisory lock, :mod:`.leasing`, ADR 0139), so one replica sends to
each peer and the others' loops wait, taking over within ``poll_s`` when the holder stops
or dies. A loop that takes a lease reads the cursor again: the previous holder moved it.

Metrics (``GET /metrics``, per peer, on the replica that holds its lease): the lag (outbox
head minus cursor), changes acknowledged, failed attempts in a row, the times of the last
ACK and the last failure, and whether this replica is the one sending.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from attested_cortex import tasks
from attested_cortex.errors import CortexError
from attested_cortex.service.workers.leasing import Leases
from attested_cortex.store import federation_sending as rows
from attested_cortex.store import outbox
from attested_cortex.store.database import Conn, Database
from attested_cortex.store.leases import FEDERATION_CLASS
from attested_cortex.store.notifications import listening
from attested_cortex.store.outbox import Stored

log = logging.getLogger(__name__)

#: The outbox's NOTIFY channel (migration 0038).
CHANNEL = "cortex_outbox"
#: The error code a :data:`Transport` raises when the peer refused the batch as a whole
#: (400, 413: more changes or bytes than it takes): the next attempt sends half as many.
BATCH_REFUSED = "peer_refused_batch"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One change to send: its outbox ``seq`` (the wire ``seq``) and its wire fields but
    ``correlation_id``, ``seq`` and ``expires_at``, which the sender adds per attempt."""

    seq: int
    change: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Ack:
    """The receiver's answer for one change."""

    seq: int
    accepted: bool
    status: str


#: The changes of ``events`` meant for the named peer, in order.
Encode = Callable[[Conn, str, Sequence[Stored]], Awaitable[list[Outgoing]]]
#: POST wire changes to the named peer; its answers in order. Raises on no answer.
Transport = Callable[[str, list[dict[str, Any]]], Awaitable[list[Ack]]]


@dataclass(frozen=True, slots=True)
class SendSettings:
    """The sender's bounds and schedule (``federation`` settings)."""

    batch: int = 100
    retry_s: tuple[float, ...] = (1.0, 5.0, 25.0)
    backoff_max_s: float = 60.0
    change_ttl_s: float = 60.0
    poll_s: float = 5.0
    first_delay_s: float = 1.0


def delay(attempts: int, settings: SendSettings) -> float:
    """The wait after the ``attempts``-th failure in a row: the schedule's delays (1, 5,
    25 s), then each twice the one before, at most ``backoff_max_s``."""
    schedule = settings.retry_s
    if attempts <= len(schedule):
        return min(schedule[max(attempts, 1) - 1], settings.backoff_max_s)
    grown: float = schedule[-1] * 2.0 ** (attempts - len(schedule))
    return min(grown, settings.backoff_max_s)


def correlation_id(origin: str, peer: str, seq: int, copy: int) -> uuid.UUID:
    """The correlation id of a change: a UUID of version 4 whose 122 free bits come from
    SHA-256 of (origin, peer, seq, copy) rather than from a random source, so every replica
    of this cortex and every restart sends a change with the same id, and the receiver's
    idempotency key (``federation:<id>``) collapses the copies two replicas send at once
    (ADR 0132). ``copy`` counts the ``expired`` answers: a fresh copy gets a fresh id."""
    digest = hashlib.sha256(f"{origin}\n{peer}\n{seq}\n{copy}".encode()).digest()
    return uuid.UUID(bytes=digest[:16], version=4)


class _Metrics:
    """The senders' Prometheus metrics, labelled by peer name (never its URL)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.lag = Gauge("cortex_federation_lag_events",
                         "Outbox sequence numbers past a peer's cursor", ["peer"],
                         registry=registry)
        self.acked = Counter("cortex_federation_changes_acked_total",
                             "Changes a peer acknowledged", ["peer"], registry=registry)
        self.failing = Gauge("cortex_federation_failed_attempts",
                             "Failed sends to a peer in a row", ["peer"], registry=registry)
        self.last_ack = Gauge("cortex_federation_last_ack_timestamp_seconds",
                              "When a peer last acknowledged changes (Unix s)", ["peer"],
                              registry=registry)
        self.last_failure = Gauge("cortex_federation_last_failure_timestamp_seconds",
                                  "When a send to a peer last failed (Unix s)", ["peer"],
                                  registry=registry)
        self.sending = Gauge("cortex_federation_sending",
                             "1 when this replica holds the peer's send lease", ["peer"],
                             registry=registry)


@dataclass
class _PeerState:
    attempts: int = 0
    #: the cursor as this process last read or moved it (None: read it from the table)
    cursor: int | None = None
    #: changes per batch now: halved when the peer refuses a batch as too large (its
    #: ``max_changes_per_batch`` or body limit below ours), kept while the process runs
    limit: int | None = None
    #: when the cursor was last written after skipping events not for the peer
    #: (monotonic s), and whether a skip since is only in memory
    saved_at: float = 0.0
    dirty: bool = False
    #: correlation ids of changes not yet acknowledged, by seq (kept across retries)
    ids: dict[int, uuid.UUID] = field(default_factory=dict)
    #: how many times a change was answered ``expired`` (its next copy's id differs)
    copies: dict[int, int] = field(default_factory=dict)
    loop: tasks.Loop | None = None
    #: whether this process held the peer's lease at its last pass
    leased: bool = False


class FederationSender:
    """The per-peer send loops and the outbox listener."""

    def __init__(self, db: Database, peers: Sequence[str], encode: Encode,
                 transport: Transport, settings: SendSettings, *, origin: str = "",
                 leases: Leases[str] | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self._db = db
        self._metrics = _Metrics(registry)
        #: One sender per peer among the replicas (unbound until :meth:`start`: held).
        self.leases = leases or Leases[str](check_s=settings.poll_s,
                                            lease_class=FEDERATION_CLASS)
        self._origin = origin
        self._encode = encode
        self._transport = transport
        self.settings = settings
        self._peers = {name: _PeerState() for name in peers}
        self._listener: tasks.Loop | None = None
        self._dsn = ""

    def start(self, dsn: str) -> None:
        """Start a loop per peer and the listener (first passes after ``first_delay_s``:
        nothing commits during the server's start-up)."""
        self._dsn = dsn
        self.leases.bind(dsn)
        expected = (CortexError, OSError, TimeoutError)
        for name, state in self._peers.items():
            state.loop = tasks.Loop(f"federation-send-{name}", self._step(name),
                                    retry_s=self.settings.retry_s[0], expected=expected,
                                    first_delay_s=self.settings.first_delay_s)
            state.loop.start()
        self._listener = tasks.Loop("federation-send-listener", self._listen,
                                    retry_s=self.settings.poll_s, expected=expected,
                                    first_delay_s=self.settings.first_delay_s)
        self._listener.start()

    async def aclose(self) -> None:
        """Stop every loop (bounded)."""
        loops = [s.loop for s in self._peers.values() if s.loop is not None]
        if self._listener is not None:
            loops.append(self._listener)
        for loop in loops:
            await loop.stop()
        await self.leases.aclose()

    def kick(self) -> None:
        """New events: wake the peers' loops that are not backing off."""
        for state in self._peers.values():
            if state.attempts == 0 and state.loop is not None:
                state.loop.wake()

    def heard_from(self, peer: str) -> None:
        """The peer just reached us: it is up, so a loop backing off tries again now."""
        state = self._peers.get(peer)
        if state is not None and state.attempts > 0 and state.loop is not None:
            state.loop.wake()

    async def _listen(self) -> float:
        async with listening(self._dsn, CHANNEL) as notes:
            async for _ in notes:
                self.kick()
        return self.settings.poll_s

    def _step(self, peer: str) -> Callable[[], Awaitable[float]]:
        async def step() -> float:
            return await self.send_once(peer)
        return step

    async def send_once(self, peer: str) -> float:
        """One pass for ``peer``: read, send, move the cursor; the seconds to wait."""
        state, settings = self._peers[peer], self.settings
        metrics = self._metrics
        if not await self.leases.holds(peer):  # another replica sends to this peer
            state.leased, state.cursor, state.dirty = False, None, False
            metrics.sending.labels(peer).set(0)
            return settings.poll_s
        metrics.sending.labels(peer).set(1)
        if not state.leased:  # just taken: the cursor may have moved meanwhile
            state.leased, state.cursor = True, None
        async with self._db.connection() as conn:
            if state.cursor is None:
                if not await rows.present(conn):
                    return settings.poll_s * 12
                state.cursor = await rows.cursor(conn, peer)
            events = await outbox.after(conn, state.cursor, state.limit or settings.batch)
            outgoing = await self._encode(conn, peer, events) if events else []
            head = (await outbox.bounds(conn))[1]
        metrics.lag.labels(peer).set(max(0, head - state.cursor))
        if not events:
            if state.dirty:  # idle: write the cursor the skips left in memory
                await self._save(peer, state)
            return settings.poll_s
        last = events[-1].seq
        if not outgoing:
            # Nothing for this peer (most often: a change another peer sent us). The cursor
            # moves in memory and is written at most every poll_s: after a restart the
            # events are read and skipped again, at no cost to the peer.
            state.cursor = last
            state.dirty = True
            if time.monotonic() - state.saved_at >= settings.poll_s:
                await self._save(peer, state)
            return 0.0
        expires = int((time.time() + settings.change_ttl_s) * 1000)
        wire = [{**o.change, "seq": o.seq, "expires_at": expires,
                 "correlation_id": str(state.ids.setdefault(o.seq, correlation_id(
                     self._origin, peer, o.seq, state.copies.get(o.seq, 0))))}
                for o in outgoing]
        try:
            acks = await self._transport(peer, wire)
        except (CortexError, OSError, TimeoutError, ValueError) as exc:
            if isinstance(exc, CortexError) and exc.code == BATCH_REFUSED:
                state.limit = max(1, len(events) // 2)
            return await self._failed(peer, state, f"no answer: {type(exc).__name__}")
        to, sent, why = self._walk(outgoing, acks, state, last)
        async with self._db.transaction() as conn:
            await rows.advance(conn, peer, to, sent)
        state.cursor, state.dirty = max(state.cursor or 0, to), False
        if sent:
            metrics.acked.labels(peer).inc(sent)
            metrics.last_ack.labels(peer).set(time.time())
        if why is None:
            metrics.lag.labels(peer).set(max(0, head - state.cursor))
        for seq in [s for s in state.ids if s <= to]:
            del state.ids[seq]
            state.copies.pop(seq, None)
        if why is not None:
            return await self._failed(peer, state, why)
        state.attempts = 0
        metrics.failing.labels(peer).set(0)
        return 0.0

    @staticmethod
    def _walk(outgoing: Sequence[Outgoing], acks: Sequence[Ack], state: _PeerState,
              last: int) -> tuple[int, int, str | None]:
        """Where the cursor may move (before the first change not accepted), how many were
        accepted, and why it stopped short (None: the whole batch is done)."""
        for index, change in enumerate(outgoing):
            ack = acks[index] if index < len(acks) else None
            if ack is None or ack.seq != change.seq:
                return change.seq - 1, index, "answer_out_of_order"
            if not ack.accepted:
                if ack.status == "expired":
                    state.ids.pop(change.seq, None)  # a fresh copy next time
                    state.copies[change.seq] = state.copies.get(change.seq, 0) + 1
                return change.seq - 1, index, ack.status
        return last, len(outgoing), None

    async def _save(self, peer: str, state: _PeerState) -> None:
        async with self._db.transaction() as conn:
            await rows.advance(conn, peer, state.cursor or 0, 0)
        state.saved_at, state.dirty = time.monotonic(), False

    async def _failed(self, peer: str, state: _PeerState, why: str) -> float:
        state.attempts += 1
        self._metrics.failing.labels(peer).set(state.attempts)
        self._metrics.last_failure.labels(peer).set(time.time())
        wait = delay(state.attempts, self.settings)
        log.warning("federation: peer %s: %s; attempt %d, next in %.0f s", peer, why,
                    state.attempts, wait)
        async with self._db.transaction() as conn:
            await rows.failed(conn, peer, why)
        return wait
