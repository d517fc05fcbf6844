"""Vectors for hybrid recall: the live embedding state, write-time embedding, query vectors
and the bounded background backfill. Called by the memory and recall pipelines, by
capabilities, and started by ``cortexctl serve`` (:func:`open_vectors`).

Recall is ``hybrid`` when the database has the embeddings table (pgvector), an embedder is
configured and its model and dimension are known; otherwise ``fulltext``. A write never
embeds (docs/adr/0014): it queues its memory for the write-behind embedder, which embeds
what has gathered in batches (a worker thread for the embedded default, one endpoint call
for a remote one) and stores the vectors in one round trip, off the request path. A full
queue, or an embedding that fails or is late (``timeout_ms``), leaves the memory without a
vector until the backfill embeds it. Client vectors carry no embedding cost and are stored
by the write itself. ``write_queue: 0`` embeds inline after each write instead. The backfill also
re-embeds every vector made by another model, of another dimension or from an older revision
(a model change), in batches with a pause between them, so it never starves requests and
never blocks start-up; and, for an embedder that cuts windows, gives a long memory written
before its windows existed its windows (docs/adr/0140), from :data:`UPGRADE_AFTER_S` after
start-up on, so that work never commits while the server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import struct
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from attested_cortex import tasks
from attested_cortex.embedding.base import (
    Embedder,
    EmbeddingError,
    EmbeddingRefusedError,
    PassageEmbedder,
    passages,
)
from attested_cortex.embedding.vectors import check_vectors
from attested_cortex.errors import CortexError, InvalidInputError
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.store import embeddings as rows
from attested_cortex.store.database import Database
from attested_cortex.store.memories import Memory
from attested_cortex.store.recall import FUSION, QueryVector

log = logging.getLogger(__name__)

Mode = Literal["hybrid", "fulltext"]

#: How long the write-behind embedder lets writes gather before it embeds them: a single
#: write has its vector within about this, a burst of writes becomes one batch.
GATHER_S = 0.025
#: The write-behind embedder lags once a memory has waited this long (capabilities say
#: ``lagging``; the lag is a metric).
LAGGING_S = 10.0
#: How long after the backfill starts it begins giving old long memories their windows
#: (docs/adr/0140): a whole store to re-embed after an upgrade waits out the start-up (a
#: failover test counts the commits lost then).
UPGRADE_AFTER_S = 1.0
#: How many refused memory ids capabilities name (the count is always whole).
REFUSED_SHOWN = 20


@dataclass(frozen=True)
class VectorSettings:
    """Tuning of embedding and backfill (``embedding:`` in the settings file)."""

    timeout_s: float = 1.0
    batch: int = 64
    pause_s: float = 0.05
    idle_s: float = 30.0
    min_similarity: float = 0.0
    vector_pool: int = 50
    #: Memories waiting for the write-behind embedder; 0 embeds inline after each write.
    write_queue: int = 4096
    #: ``encryption.sealed_namespaces``: memories there get no vector (ADR 0057 item 2).
    sealed: SealedNamespaces = field(default_factory=lambda: SealedNamespaces(()))


@dataclass(frozen=True)
class SealedNamespaces:
    """Namespace patterns (the pattern language of rules and scope qualifiers) whose
    memories get no vector (ADR 0057 item 2): an embedding reveals meaning, and pgvector
    compares plain vectors only, so a namespace marked sealed is recalled by full text over
    its blind tokens alone."""

    patterns: tuple[str, ...]
    _parsed: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_parsed", tuple(parse_pattern(p) for p in self.patterns))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def covers(self, namespace: str) -> bool:
        """Whether memories of ``namespace`` get no vector."""
        return any(matches(p, namespace) for p in self._parsed)


@dataclass
class Progress:
    """What the backfill has done: read by capabilities, written by the backfill only."""

    state: str = "starting"
    pending: int | None = None
    embedded: int = 0
    failed: int = 0
    last_error: str | None = None
    index: bool | None = None
    #: Memories (id -> revision) the embedder refused: skipped until they change or the
    #: server restarts, so one of them never blocks the rest (a poison pill).
    refused: dict[uuid.UUID, int] = field(default_factory=dict)
    refused_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "pending": self.pending, "embedded": self.embedded,
                "failed": self.failed, "last_error": self.last_error,
                "refused": {"count": len(self.refused), "reason": self.refused_reason,
                            "ids": sorted(str(i) for i in self.refused)[:REFUSED_SHOWN]}}


@dataclass(frozen=True)
class VectorMetrics:
    """Prometheus series of embedding and backfill."""

    seconds: Histogram
    failures: Counter
    backfilled: Counter
    pending: Gauge
    queued: Gauge
    lag: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None) -> VectorMetrics:
        reg = registry or CollectorRegistry()
        return cls(
            seconds=Histogram("cortex_embedding_seconds", "Time spent embedding", ["stage"],
                              registry=reg, buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                     0.005, 0.01, 0.025, 0.1, 0.5, 1, 5)),
            failures=Counter("cortex_embedding_failures", "Embeddings that failed or were late",
                             ["stage"], registry=reg),
            backfilled=Counter("cortex_embedding_backfilled", "Vectors written by the backfill",
                               registry=reg),
            pending=Gauge("cortex_embedding_backfill_pending",
                          "Live memories without a current vector", registry=reg),
            queued=Gauge("cortex_embedding_write_behind_queued",
                         "Memories stored and waiting for the write-behind embedder",
                         registry=reg),
            lag=Gauge("cortex_embedding_write_behind_lag_seconds",
                      "How long the oldest memory waiting for the write-behind embedder "
                      "has waited", registry=reg),
        )


@dataclass
class WriteBehind:
    """Memories stored but not embedded yet: one entry per memory (its newest revision),
    bounded; filled by writes, drained by :func:`_write_behind` only. A write never waits
    for it: a full queue refuses the memory, which the backfill embeds later."""

    limit: int
    waiting: dict[uuid.UUID, rows.Pending] = field(default_factory=dict)
    #: When each waiting memory was first queued (``time.monotonic``), oldest first.
    since: dict[uuid.UUID, float] = field(default_factory=dict)
    #: The batch being embedded (the backfill leaves these and the waiting ones alone).
    flying: frozenset[uuid.UUID] = frozenset()
    embedded: int = 0
    passages: int = 0
    overflowed: int = 0
    failed: int = 0
    _ready: asyncio.Event = field(default_factory=asyncio.Event)

    def offer(self, memory: Memory) -> bool:
        """Queue ``memory``; False when the queue is full (the backfill will find it)."""
        if memory.id not in self.waiting and len(self.waiting) >= self.limit:
            self.overflowed += 1
            return False
        self.waiting[memory.id] = rows.Pending(
            memory.id, memory.revision, rows.embedding_text(memory.title, memory.content),
            memory.updated_at)
        self.since.setdefault(memory.id, time.monotonic())
        self._ready.set()
        return True

    def take(self, count: int) -> list[rows.Pending]:
        """Up to ``count`` queued memories, oldest first."""
        batch = []
        for key in list(self.waiting)[:count]:
            batch.append(self.waiting.pop(key))
            self.since.pop(key, None)
        if not self.waiting:
            self._ready.clear()
        self.flying = frozenset(p.id for p in batch)
        return batch

    def holds(self, memory_id: uuid.UUID) -> bool:
        """Whether ``memory_id`` waits here or is being embedded: the backfill leaves it
        alone (embedding it twice halved the drain while the embedder lagged)."""
        return memory_id in self.waiting or memory_id in self.flying

    @property
    def queued(self) -> int:
        """Memories stored and not embedded yet (the batch being embedded included)."""
        return len(self.waiting) + len(self.flying)

    @property
    def lag_s(self) -> float:
        """How long the oldest waiting memory has waited (0 when none waits)."""
        oldest = next(iter(self.since.values()), None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    @property
    def lagging(self) -> bool:
        """Whether the embedder falls behind the writes: the oldest waits over
        :data:`LAGGING_S`, or the queue is full (new memories go to the backfill)."""
        return self.lag_s > LAGGING_S or len(self.waiting) >= self.limit

    def as_dict(self) -> dict[str, Any]:
        return {"queued": self.queued, "embedded": self.embedded, "passages": self.passages,
                "overflowed": self.overflowed, "failed": self.failed, "limit": self.limit,
                "lag_s": round(self.lag_s, 3), "lagging": self.lagging}

    def export(self, metrics: VectorMetrics) -> None:
        """Let the metrics read the queue when scraped."""
        metrics.queued.set_function(lambda: float(self.queued))
        metrics.lag.set_function(lambda: self.lag_s)


@dataclass
class Vectors:
    """The server's embedding state (one per server; the backfill updates ``progress``)."""

    embedder: Embedder | None
    table: bool
    reason: str | None
    settings: VectorSettings
    metrics: VectorMetrics
    progress: Progress = field(default_factory=Progress)
    behind: WriteBehind | None = None
    #: Whether vector rows record their passage scheme (migration 0041, docs/adr/0140); a
    #: server on an older schema writes rows without it and gives old memories no windows.
    scheme: bool = True
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _behind_task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        """Whether vectors are searched: table, embedder, known model and dimension."""
        if not self.table or self.embedder is None:
            return False
        info = self.embedder.info
        return bool(info.model) and info.dimension is not None

    @property
    def mode(self) -> Mode:
        return "hybrid" if self.ready else "fulltext"

    def describe(self) -> dict[str, Any]:
        """The ``recall`` part of capabilities."""
        return {
            "mode": self.mode,
            "reason": None if self.ready else self._why_not(),
            "embedder": None if self.embedder is None else self.embedder.info.as_dict(),
            "vector_extension": self.table,
            "vector_index": self.progress.index,
            "backfill": self.progress.as_dict() if self.table and self.embedder else None,
            "write_behind": None if self.behind is None else self.behind.as_dict(),
            "fusion": FUSION,
        }

    def _why_not(self) -> str:
        if not self.table:
            return self.reason or "pgvector is not available in this database"
        if self.embedder is None:
            return "no embedder configured (--embedder none)"
        return "waiting for the embedder's first answer (model and dimension unknown)"

    def wake(self) -> None:
        """Ask the backfill to look for work now."""
        self._wake.set()


def _no_vectors(settings: VectorSettings, registry: CollectorRegistry | None,
                embedder: Embedder | None, reason: str) -> Vectors:
    return Vectors(embedder, False, reason, settings, VectorMetrics.create(registry))


async def vectors_available(db: Database) -> bool:
    """Whether the database can store vectors (the embeddings table exists)."""
    async with db.connection() as conn:
        return await rows.available(conn)


async def open_vectors(
    db: Database, embedder: Embedder | None, *, settings: VectorSettings,
    registry: CollectorRegistry | None,
) -> Vectors:
    """The embedding state of this database; starts the backfill when there is work to do."""
    async with db.connection() as conn:
        table = await rows.available(conn)
        scheme = table and await rows.has_scheme(conn)
    if not table:
        return _no_vectors(settings, registry, embedder,
                           "pgvector is not installed, or the migrating role could not "
                           "create it: run `cortexctl migrate` as a role that can")
    vectors = Vectors(embedder, True, None, settings, VectorMetrics.create(registry),
                      scheme=scheme)
    if settings.sealed:  # a pattern added since: its memories' vectors go before serving
        async with db.connection() as conn:
            dropped = await rows.drop_covered(conn, settings.sealed.covers)
        if dropped:
            log.info("vectors of sealed namespaces dropped (ADR 0057)",
                     extra={"vectors": dropped, "patterns": list(settings.sealed.patterns)})
    if embedder is not None and embedder.embeds:
        vectors._task = asyncio.create_task(_backfill(db, vectors), name="embedding-backfill")
        if settings.write_queue > 0:
            vectors.behind = WriteBehind(settings.write_queue)
            vectors.behind.export(vectors.metrics)
            vectors._behind_task = asyncio.create_task(_write_behind(db, vectors),
                                                       name="embedding-write-behind")
    elif embedder is not None:
        vectors.progress.state = "client"  # the client sends vectors: nothing to compute
    return vectors


async def close_vectors(vectors: Vectors) -> None:
    """Stop the backfill and the write-behind embedder (what it still held is stale and
    the next backfill embeds it), then close the embedder."""
    await tasks.stop((vectors._behind_task, vectors._task))
    if vectors.embedder is not None:
        await vectors.embedder.aclose()


def check_vector(vectors: Vectors | None, vector: Sequence[float] | None, *,
                 query: bool = False, namespace: str | None = None) -> None:
    """Refuse a client vector this server cannot use (400, before anything is written).
    Without pgvector a query's vector is not refused: recall answers by full text. A
    memory's vector in a sealed namespace (``namespace``) is refused
    ``vector_in_sealed_namespace`` (ADR 0057 item 2)."""
    if vector is None:
        return
    if (namespace is not None and vectors is not None
            and vectors.settings.sealed.covers(namespace)):
        raise InvalidInputError(
            f"namespace {namespace!r} is sealed (encryption.sealed_namespaces): its memories "
            "keep no vector, since a vector reveals their meaning; omit embedding",
            code="vector_in_sealed_namespace", field="embedding")
    if vectors is not None and not vectors.table:
        if query:
            return
        # before the embedder: without pgvector the server runs with none, whatever was
        # configured, and "embedder: none" sent the operator of --embedder client astray
        raise InvalidInputError(
            "this database has no vector support (pgvector is not installed, or the "
            "migrating role could not create it), so it stores no vectors and recall is "
            "full text: omit embedding, or install pgvector and run `cortexctl migrate`",
            field="embedding")
    if vectors is None or vectors.embedder is None or vectors.embedder.embeds:
        source = "none" if vectors is None or vectors.embedder is None \
            else vectors.embedder.info.source
        raise InvalidInputError(
            f"this server does not take client vectors (embedder: {source}); omit embedding",
            field="embedding")
    info = vectors.embedder.info
    if len(vector) != info.dimension:
        raise InvalidInputError(
            f"embedding has {len(vector)} dimensions; this server's vectors ({info.model}) "
            f"have {info.dimension}", field="embedding", expected=info.dimension,
            got=len(vector))
    problem = stored_problem(vector)
    if problem is not None:
        raise InvalidInputError(f"embedding {problem}", field="embedding")


def stored_problem(vector: Sequence[float]) -> str | None:
    """Why ``vector`` cannot be stored and compared as pgvector keeps it (single precision:
    finite and within about 3.4e38, not all zeros once rounded), or None. Checked before
    anything is written: a value that is finite as a float64 but not as a float4 failed only
    when its vector was stored, after the memory had committed (issue 20 item 1)."""
    try:
        rounded = struct.unpack(f"{len(vector)}f", struct.pack(f"{len(vector)}f", *vector))
    except (OverflowError, struct.error):
        return "holds a value outside single precision (about ±3.4e38)"
    if not all(math.isfinite(x) for x in rounded):
        return "holds a value that is not a finite number"
    if not any(rounded):
        return "is all zeros (no direction to compare)"
    return None


async def after_write(
    vectors: Vectors | None, db: Database, memory: Memory, client_vector: Sequence[float] | None,
) -> None:
    """Give a just-written memory its vector: store the client's, queue the memory for the
    write-behind embedder, or (``write_queue: 0``) embed it now; else leave it to the
    backfill."""
    if vectors is None or not vectors.table or vectors.embedder is None or memory.deleted:
        return
    if vectors.settings.sealed.covers(memory.namespace):
        return  # a sealed namespace: no vector, whoever offers one (a hook moved it here)
    embedder = vectors.embedder
    if client_vector is not None:
        made: rows.Passages = [client_vector]
    elif not embedder.embeds:
        return
    elif vectors.behind is not None:
        if not vectors.behind.offer(memory):
            vectors.wake()  # the queue is full: the backfill finds what it could not take
        return
    else:
        started = time.perf_counter()
        try:
            (made,) = await embed_checked(
                embedder, [rows.embedding_text(memory.title, memory.content)],
                timeout_s=vectors.settings.timeout_s)
        except EmbeddingError as exc:
            vectors.metrics.failures.labels("write").inc()
            log.warning("embedding deferred to the backfill", extra={"error": str(exc)})
            vectors.wake()
            return
        vectors.metrics.seconds.labels("write").observe(time.perf_counter() - started)
    problem = next(filter(None, map(stored_problem, made)), None)
    if problem is not None:  # a remote embedder's NaN: the memory stands, without a vector
        vectors.metrics.failures.labels("write").inc()
        log.warning("embedding left out: the vector %s", problem,
                    extra={"memory_id": str(memory.id)})
        return
    try:
        async with db.connection() as conn:
            await rows.put(conn, memory_id=memory.id, revision=memory.revision,
                           model=embedder.info.model, passages=made, scheme=vectors.scheme)
    except CortexError as exc:  # the write committed: it is not a failure; backfill retries
        vectors.metrics.failures.labels("write").inc()
        log.warning("embedding deferred to the backfill", extra={"error": type(exc).__name__})
        vectors.wake()


async def forget(vectors: Vectors | None, conn: Any, memory_id: uuid.UUID) -> None:
    """Drop a tombstoned memory's vector in the tombstone's transaction."""
    if vectors is not None and vectors.table:
        await rows.forget(conn, memory_id)


@dataclass(frozen=True)
class QueryPlan:
    """How one recall runs: its vector (None: full-text only) and why it is degraded."""

    vector: QueryVector | None
    degraded: str | None = None


def searches(vectors: Vectors | None) -> bool:
    """Whether a recall may have a vector half (what :func:`plan_query` will say, known
    before the query is embedded)."""
    return vectors is not None and vectors.ready and vectors.embedder is not None


async def plan_query(
    vectors: Vectors | None, text: str, client_vector: Sequence[float] | None,
) -> QueryPlan:
    """Embed the query (or take the client's vector) within the deadline."""
    if vectors is None or not searches(vectors) or vectors.embedder is None:
        return QueryPlan(None)
    embedder = vectors.embedder
    info = embedder.info
    assert info.dimension is not None
    degraded: str | None = None
    if client_vector is not None:
        vector: Sequence[float] | None = client_vector
    elif not embedder.embeds:
        vector, degraded = None, "no query embedding sent: full-text only"
    else:
        started = time.perf_counter()
        try:
            (vector,) = await embedder.embed([text], timeout_s=vectors.settings.timeout_s)
            vectors.metrics.seconds.labels("query").observe(time.perf_counter() - started)
        except EmbeddingError as exc:
            vectors.metrics.failures.labels("query").inc()
            vector, degraded = None, f"query not embedded ({exc}): full-text only"
    if vector is not None and not all(math.isfinite(x) for x in vector):
        vector, degraded = None, "query embedding is not finite: full-text only"
    s = vectors.settings
    if vector is None:
        return QueryPlan(QueryVector(info.model, (0.0,) * info.dimension, search=False),
                         degraded)
    return QueryPlan(QueryVector(info.model, tuple(vector), min_similarity=s.min_similarity,
                                 vector_pool=s.vector_pool))


async def _write_behind(db: Database, vectors: Vectors) -> None:
    """Embed queued memories in batches and store their vectors, for as long as the server
    runs. It waits :data:`GATHER_S` after the first memory arrives, so a burst of writes
    becomes one batch (and the event loop stays with the requests meanwhile); a failed batch
    is left to the backfill."""
    behind, s, metrics = vectors.behind, vectors.settings, vectors.metrics
    assert behind is not None and vectors.embedder is not None
    embedder = vectors.embedder
    while True:
        await behind._ready.wait()
        await asyncio.sleep(GATHER_S)  # a burst of writes becomes one batch
        batch = behind.take(s.batch)
        if not batch:
            continue
        started = time.perf_counter()
        try:
            made = await embed_checked(embedder, [p.text for p in batch],
                                       timeout_s=s.timeout_s, background=True)
            behind.passages += sum(map(len, made))
            metrics.seconds.labels("write").observe(time.perf_counter() - started)
            async with db.connection() as conn:
                await rows.put_many(conn, model=embedder.info.model, rows=[
                    (p.id, p.revision, v) for p, v in zip(batch, made, strict=True)],
                    scheme=vectors.scheme)
            behind.embedded += len(batch)
        except (EmbeddingError, OSError, CortexError) as exc:
            behind.failed += len(batch)
            metrics.failures.labels("write").inc(len(batch))
            log.warning("write-behind embedding left to the backfill",
                        extra={"memories": len(batch), "error": str(exc)})
            vectors.wake()
        except Exception:  # a defect must not end the embedder: the backfill covers the batch
            behind.failed += len(batch)
            metrics.failures.labels("write").inc(len(batch))
            log.exception("write-behind batch failed", extra={"memories": len(batch)})
            vectors.wake()
        finally:
            behind.flying = frozenset()


async def _backfill(db: Database, vectors: Vectors) -> None:
    """Embed what lacks a current vector, batch by batch, for as long as the server runs."""
    s, progress = vectors.settings, vectors.progress
    backoff = 1.0
    windowing = vectors.scheme and isinstance(vectors.embedder, PassageEmbedder)
    upgrade_at = time.monotonic() + UPGRADE_AFTER_S
    while True:
        try:
            await _ensure_ready(db, vectors)
            # docs/adr/0140: old long memories get their windows, once start-up is over
            early = upgrade_at - time.monotonic()
            await _drain(db, vectors, windows=windowing and early <= 0)
            progress.state, progress.last_error, backoff = "idle", None, 1.0
            wait = s.idle_s
            if windowing and early > 0 and await _unwindowed(db, vectors):
                wait = min(wait, early)  # old memories wait: the next pass, after start-up
        except EmbeddingError as exc:
            progress.state, progress.last_error = "failing", str(exc)
            vectors.metrics.failures.labels("backfill").inc()
            wait, backoff = backoff, min(backoff * 2, 60.0)
        except (OSError, CortexError) as exc:
            # the store translates driver errors (NotReadyError): an outage pauses the
            # backfill, never ends it
            progress.state, progress.last_error = "failing", f"database: {exc}"
            wait, backoff = backoff, min(backoff * 2, 60.0)
        vectors._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):  # not wait_for: it can lose a cancel (tasks.py)
                await vectors._wake.wait()


async def _unwindowed(db: Database, vectors: Vectors) -> bool:
    """Whether memories written before their model's windows wait (docs/adr/0140): only then
    does a pass follow start-up early (another would meet a second server's model change
    mid-flight as stale, where the idle wait lets it be)."""
    assert vectors.embedder is not None
    info = vectors.embedder.info
    assert info.dimension is not None
    sealed = vectors.settings.sealed
    async with db.connection() as conn:
        return await rows.count_stale(conn, model=info.model, dim=info.dimension,
                                      skip=sealed.covers if sealed else None,
                                      windows=True) > 0


async def _ensure_ready(db: Database, vectors: Vectors) -> None:
    """Learn a remote model's dimension; make sure its HNSW index exists where we may."""
    assert vectors.embedder is not None
    info = vectors.embedder.info
    if info.dimension is None or not info.model:
        await vectors.embedder.embed(["dimension probe"], timeout_s=vectors.settings.timeout_s)
        info = vectors.embedder.info
    if vectors.progress.index:
        return
    assert info.dimension is not None
    async with db.connection() as conn:
        if await rows.has_index(conn, info.dimension):
            vectors.progress.index = True
            return
        try:
            await rows.create_index(conn, info.dimension)
            vectors.progress.index = True
        except CortexError as exc:  # not the table's owner, too many dimensions: exact
            vectors.progress.index = False  # scans still work
            log.warning("no HNSW index for this dimension; vector search scans",
                        extra={"dimension": info.dimension, "error": str(exc.__cause__ or exc)})


async def _drain(db: Database, vectors: Vectors, *, windows: bool = False) -> None:
    """One pass over what is stale (``windows``: a memory written before its model's windows
    is too, docs/adr/0140)."""
    assert vectors.embedder is not None
    embedder, s, progress = vectors.embedder, vectors.settings, vectors.progress
    info = embedder.info
    assert info.dimension is not None
    sealed = s.sealed.covers if s.sealed else None
    async with db.connection() as conn:
        await rows.purge_tombstoned(conn)
        if sealed is not None:  # written meanwhile by a server without the pattern
            await rows.drop_covered(conn, sealed)
        progress.pending = await rows.count_stale(conn, model=info.model, dim=info.dimension,
                                                  skip=sealed, windows=windows)
    vectors.metrics.pending.set(progress.pending)
    if not progress.pending:
        # Nothing stale: no pass. A pass walks every live memory in windows (1,563 round
        # trips at 100k, about 2 s of both cores), which every server start used to make
        # while its first requests waited behind it.
        return
    after: tuple[datetime, uuid.UUID] | None = None
    skipped = 0  # refused or write-behind memories met in this pass: not embedded by it
    while True:
        async with db.connection() as conn:
            window = await rows.stale(conn, model=info.model, dim=info.dimension,
                                      window=s.batch, after=after, skip=sealed,
                                      windows=windows)
        behind = vectors.behind
        batch = [p for p in window.stale if progress.refused.get(p.id) != p.revision
                 and not (behind is not None and behind.holds(p.id))]
        skipped += len(window.stale) - len(batch)
        if batch:
            skipped += await _backfill_batch(db, vectors, batch)
            await asyncio.sleep(s.pause_s)  # leave the pool and the loop to requests
        after = window.next
        if after is None:
            # end of a pass: what was written meanwhile needs another
            async with db.connection() as conn:
                progress.pending = await rows.count_stale(conn, model=info.model,
                                                          dim=info.dimension, skip=sealed,
                                                          windows=windows)
            vectors.metrics.pending.set(progress.pending)
            if progress.pending <= skipped:
                return
            skipped = 0


async def _backfill_batch(db: Database, vectors: Vectors, batch: list[rows.Pending]) -> int:
    """Embed and store one window's stale memories; the number the embedder refused."""
    assert vectors.embedder is not None
    embedder, progress = vectors.embedder, vectors.progress
    progress.state = "running"
    started = time.perf_counter()
    try:
        made, refused = await _isolating(embedder, batch,
                                         timeout_s=max(vectors.settings.timeout_s, 5.0))
    except EmbeddingError:
        progress.failed += len(batch)
        raise
    vectors.metrics.seconds.labels("backfill").observe(time.perf_counter() - started)
    if refused and not made and len(batch) > 1:
        # every text refused: the endpoint (a wrong model name, a bad key) rather than the
        # memories; back off as for an outage instead of blaming each of them
        progress.failed += len(batch)
        raise EmbeddingError(f"the embedder refused every text of a batch: {refused[0][1]}")
    for pending, reason in refused:
        progress.refused[pending.id] = pending.revision
        progress.refused_reason = reason
        log.warning("the embedder refused a memory; the backfill goes on without it",
                    extra={"memory_id": str(pending.id), "error": reason})
    progress.failed += len(refused)
    if made:
        async with db.connection() as conn:
            await rows.put_many(conn, model=embedder.info.model,
                                rows=[(p.id, p.revision, v) for p, v in made],
                                scheme=vectors.scheme)
    progress.embedded += len(made)
    progress.pending = max(0, (progress.pending or 0) - len(made))
    vectors.metrics.backfilled.inc(len(made))
    vectors.metrics.pending.set(progress.pending)
    return len(refused)


Made = list[tuple[rows.Pending, list[list[float]]]]


async def _isolating(embedder: Embedder, batch: list[rows.Pending], *,
                     timeout_s: float) -> tuple[Made, list[tuple[rows.Pending, str]]]:
    """Vectors for ``batch``; when the embedder refuses it, bisect it until the memories
    at fault stand alone (a refused batch of n costs about 2 log2(n) more calls per bad
    memory). Any other failure (unreachable, late) is the caller's to back off from."""
    try:
        made = await embed_checked(embedder, [p.text for p in batch], timeout_s=timeout_s,
                                   background=True)
        return list(zip(batch, made, strict=True)), []
    except EmbeddingRefusedError as exc:
        if len(batch) == 1:
            return [], [(batch[0], str(exc))]
    half = len(batch) // 2
    first, first_refused = await _isolating(embedder, batch[:half], timeout_s=timeout_s)
    second, second_refused = await _isolating(embedder, batch[half:], timeout_s=timeout_s)
    return first + second, first_refused + second_refused


async def embed_checked(embedder: Embedder, texts: Sequence[str], *, timeout_s: float,
                        background: bool = False) -> list[list[list[float]]]:
    """Each text's passage vectors (docs/adr/0096), refusing a vector that is not finite or
    is all zeros (the write path stores what it gets; the query path checks on its own)."""
    made = await passages(embedder, texts, timeout_s=timeout_s, background=background)
    check_vectors([v for text in made for v in text])
    return made
