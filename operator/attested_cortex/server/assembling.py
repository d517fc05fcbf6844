"""The composition root: the one place a server's parts are opened and put together.

:func:`open_services` is called by ``cortexctl serve`` (:mod:`.serving`), ``cortexctl doctor``,
the benches and the tests, so each runs the same assembly. Order: the master key ring (ADR
0050) -> schema check (refuse a newer or altered schema; an older one serves but is not ready
until migrated) -> graph backend -> pool -> hooks -> keys -> the audit chain writer -> policy
-> approvals -> embedder and vector state (the backfill starts in the background) ->
transcript retention; the sweepers start last, once the services exist. Every part is built
before the frozen :class:`Services` that holds it; the caller's ``stack`` closes them in reverse.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack

from prometheus_client import CollectorRegistry, Gauge

from attested_cortex.attest.keyedchain import LiveSeal
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.loading import KeySource
from attested_cortex.attest.masterkeys import KeyRing
from attested_cortex.attest.memory_sealing import MemorySeal
from attested_cortex.attest.ringwatch import RingSource
from attested_cortex.attest.sealing import Sealer
from attested_cortex.embedding.base import EmbeddingError
from attested_cortex.embedding.chat import ChatClient
from attested_cortex.embedding.choosing import MODES, build_embedder
from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.dispatching import open_pipeline
from attested_cortex.server.configuring import (
    approvals_from,
    check_at_rest_key,
    check_master_key,
    key_ring_from,
    limits_from,
    policy_from,
    retention_from,
    sealer_from,
)
from attested_cortex.server.delivery_process import DeliveryProcess
from attested_cortex.server.settings import ServerSettings
from attested_cortex.server.subscribing import deliverer_from
from attested_cortex.service.pipeline import outboxing, recording
from attested_cortex.service.pipeline.context import AuditSink, Services
from attested_cortex.service.resources import auditing
from attested_cortex.service.resources.spoke import audit as spoke_audit
from attested_cortex.service.resources.spoke import native as spoke_native
from attested_cortex.service.resources.spoke import reflections as spoke_reflections
from attested_cortex.service.resources.spoke import transfer as spoke_transfer
from attested_cortex.service.workers.checkpointing import Checkpointer
from attested_cortex.service.workers.delivering import Delivery
from attested_cortex.service.workers.embedding import (
    SealedNamespaces,
    Vectors,
    VectorSettings,
    close_vectors,
    open_vectors,
    vectors_available,
)
from attested_cortex.service.workers.pending_receipts import Handler, PendingReceipts, Reflector
from attested_cortex.service.workers.read_recording import ReadRecorder
from attested_cortex.service.workers.resealing import Resealer
from attested_cortex.service.workers.ringreloading import RingReloader
from attested_cortex.service.workers.transcript_sweeping import Transcripts
from attested_cortex.service.workers.transfer_expiry import TransferExpiry
from attested_cortex.store import decisions, key_checks, outbox
from attested_cortex.store.database import AnyConn, Conn, Database, single_connection
from attested_cortex.store.embeddings import session_settings
from attested_cortex.store.graph.age_setup import age_available, configure_age_connection
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.graph.selecting import select_backend
from attested_cortex.store.migrating import current_version
from attested_cortex.types import AgentId

log = logging.getLogger(__name__)


async def open_services(settings: ServerSettings, stack: AsyncExitStack) -> Services:
    """Open every part the settings ask for; ``stack`` closes them."""
    # First: a missing or malformed master key stops start-up before anything is opened.
    key_ring = await asyncio.to_thread(key_ring_from, settings)  # Argon2id may run
    master_keys = None
    if key_ring is not None:  # versions and fingerprints only, never material
        log.info("master key ring loaded: %s", key_ring.describe())
        master_keys = RingSource(key_ring, settings.master_key.dir
                                 if settings.master_key is not None else None)
    check_at_rest_key(settings, key_ring)  # before the database is asked anything
    async with single_connection(settings.database_url) as first:
        await current_version(first)  # refuses a newer or altered schema
        await _check_master_key(first, key_ring)  # the cortex's own key, or none needed
        graph = await _select_graph(first, settings)
        at_rest_default = await _at_rest_default(first, settings, key_ring)
    sealer = sealer_from(settings, key_ring, at_rest_default)
    if sealer is not None and master_keys is not None:
        master_keys.listen(sealer.rekey)  # a reloaded ring seals the next row (ADR 0066)
    db = await _open_pool(settings, graph, stack,
                          None if master_keys is None else LiveSeal(master_keys),
                          None if sealer is None else MemorySeal(sealer))
    registry = CollectorRegistry()
    hooks = await open_pipeline(settings.hooks_file, registry=registry)
    stack.push_async_callback(hooks.aclose)
    keys = KeySource(settings.keys_dir) if settings.keys_dir is not None else None
    if keys is not None:
        keys.snapshot()  # unreadable or inconsistent key files stop start-up, loudly
    sink = _audit_sink(settings, db, keys)
    reads = None if sink is None or keys is None or not settings.audit.record_reads \
        or settings.audit_signer is None else ReadRecorder(db, keys, settings.audit_signer)
    policy = policy_from(settings)
    record = recording.approval_recorder(permission_mode=settings.permissions.mode,
                                         registry=registry, sink=sink)
    # Counted on first use, registered now: every series the chart's alerts and dashboard
    # read is on /metrics from the start (tests/gitops/test_metric_names.py).
    recording.counter(registry)
    auditing.counter(registry)
    # Registered with approvals off too (then 0): the dashboard's panel never reads "no data".
    pending = Gauge("cortex_approvals_pending", "Actions waiting for an approval decision",
                    registry=registry)
    approvals = approvals_from(settings, db, policy, record=record, pending_gauge=pending,
                               sealer=sealer)
    present = await _outbox_present(db)
    vectors = await _open_vectors(settings, db, registry)  # last: it may load a model
    stack.push_async_callback(close_vectors, vectors)
    services = Services(
        db=db, limits=limits_from(settings), graph=graph, hooks=hooks,
        permission_mode=settings.permissions.mode, auth_mode=settings.auth,
        metrics_registry=registry, keys=keys, master_keys=master_keys, sealer=sealer,
        at_rest_from="settings" if settings.encryption.at_rest is not None
        else "cortex default",
        policy=policy, vectors=vectors,
        approvals=approvals, transcripts=Transcripts(db, retention_from(settings),
                                audit_key=_signer_key(settings, keys)),
        audit_sink=sink,
        access_sink=None if reads is None else reads.record,
        read_recorder=reads,
        resealer=None if sealer is None else Resealer(
            db, sealer, batch=settings.encryption.reseal_batch,
            pause_s=settings.encryption.reseal_pause_ms / 1000,
            audit_key=_signer_key(settings, keys)),
        pending=_pending(settings, db),
        transfer_expiry=TransferExpiry(db),
        checkpointer=_checkpointer(settings, db, keys, registry),
        outbox=present,
        deliverer=_delivery(settings, db, registry, sealer, at_rest_default)
        if present else None,
        records=spoke_native.GATE,  # the family gates its records' native API (ADR 0125)
    )
    if approvals is not None and present:  # approval events through subscriptions (K4)
        approvals.outbox = outboxing.approvals(services)
    signer = _signer_key(settings, keys)
    adopted = await spoke_audit.adopt_records(db, signer() if signer is not None else None)
    if adopted:  # once, after the upgrade to migration 0032 (ADR 0087)
        log.info("spoke-memory records written before their placement was recorded are "
                 "now covered by the audit chain", extra={"records": adopted})
    noted = await spoke_audit.index_rows(db)
    if noted:  # once, after the upgrade to migration 0037 or a bundle import (ADR 0087)
        log.info("spoke-memory rows indexed by their latest op record", extra={"rows": noted})
    await _start_sweepers(services, settings, stack)
    return services


async def _check_master_key(conn: AnyConn, ring: KeyRing | None) -> None:
    """Refuse a key that is not the cortex's own, or a start without one where the cortex
    is keyed (ADR 0088); record the fingerprints of the ring's versions not recorded yet
    (the first start with a version)."""
    if ring is None:
        check_master_key(None, await key_checks.recorded(conn),
                         keyed=await key_checks.keyed(conn))
        return
    check_master_key(ring, await key_checks.recorded(conn), keyed=True)
    recorded = await key_checks.record(conn, {v: ring.keys[v].fingerprint
                                              for v in ring.versions})
    check_master_key(ring, recorded, keyed=True)  # a racing server recorded another key


async def _at_rest_default(conn: AnyConn, settings: ServerSettings,
                           ring: KeyRing | None) -> bool:
    """The cortex's own default for ``encryption.at_rest`` (ADR 0079), asked only when the
    setting is unset and a master key is configured (without one nothing can be sealed and
    nothing is decided): decided once and kept in the database (:mod:`.decisions`); off on a
    schema older than 0028."""
    if settings.encryption.at_rest is not None or ring is None:
        return False
    decided = await decisions.at_rest_default(conn)
    log.info("encryption.at_rest unset: this cortex's default is %s (%s)",
             "on" if decided else "off",
             "not migrated to 0028" if decided is None else "decided at its first start")
    return bool(decided)


def _delivery(settings: ServerSettings, db: Database, registry: CollectorRegistry,
              sealer: Sealer | None, at_rest_default: bool) -> Delivery | None:
    """Webhook delivery as ``subscriptions.delivery`` asks (ADR 0142): a child process at a
    lower CPU priority (its supervisor here; the child builds its own sealer from the same
    settings and the cortex's default), or the deliverer in this event loop."""
    if settings.subscriptions.enabled and settings.subscriptions.delivery == "process":
        return DeliveryProcess(settings, db, sealer, at_rest_default=at_rest_default,
                               registry=registry)
    return deliverer_from(settings, db, registry, sealer)


def _pending(settings: ServerSettings, db: Database) -> PendingReceipts:
    """The pending-receipt worker (ADR 0069): exports over the bound always, reflections
    when an OpenAI-compatible endpoint is configured."""
    spoke = settings.spoke_memory
    reflector: Reflector | None = None
    handlers: dict[str, Handler] = {"export": spoke_transfer.export_job}
    if spoke.reflection is not None:
        r = spoke.reflection
        try:
            client = ChatClient(r.endpoint, model=r.model, api_key_file=r.api_key_file,
                                max_tokens=r.max_tokens)
        except EmbeddingError as exc:
            raise InvalidInputError(str(exc), field="spoke_memory.reflection") from exc
        reflector = Reflector(client, r.timeout_ms / 1000)
        handlers["reflection"] = spoke_reflections.reflection_job(reflector)
    return PendingReceipts(db, handlers, reflector=reflector,
                           export_pending_records=spoke.export_pending_records,
                           idle_s=spoke.pending_poll_ms / 1000)


async def _open_pool(settings: ServerSettings, graph: GraphBackend,
                     stack: AsyncExitStack, seal: LiveSeal | None,
                     memories: MemorySeal | None) -> Database:
    """The connection pool, each connection set up for the graph backend and vectors,
    sealing every audit event it appends when the cortex has a master key (ADR 0051), and
    sealing (``encryption.at_rest``) and opening memory rows (ADR 0056)."""
    vector_session = session_settings(settings.embedding.vector_pool)

    async def configure(conn: Conn) -> None:
        if graph.name == "age":
            await configure_age_connection(conn)
        await vector_session(conn)

    db = await Database.open(settings.database_url, max_size=settings.pool_max_size,
                             configure=configure,
                             lock_timeout_s=settings.db_lock_timeout_ms / 1000,
                             statement_timeout_s=settings.db_statement_timeout_ms / 1000,
                             reconnect_wait_s=reconnect_wait_s(settings),
                             seal=seal, memory_cipher=memories)
    stack.push_async_callback(db.close)
    return db


def reconnect_wait_s(settings: ServerSettings) -> float:
    """How long a request waits for an unreachable database (ADR 0126): the setting, but at
    most 80 % of the write deadline, so that a write that waited keeps time for its commit (a
    write past its deadline is a 503 commit_unconfirmed, which names a commit it never sent)."""
    return min(settings.db_reconnect_wait_ms, settings.db_write_timeout_ms * 4 // 5) / 1000


def _audit_sink(settings: ServerSettings, db: Database,
                keys: KeySource | None) -> AuditSink | None:
    """The chain writer of policy records when ``audit_signer`` is set; its private key
    must be mounted (an AgentIdentity with Cortex custody) or start-up stops."""
    signer = settings.audit_signer
    if signer is None:
        return None
    if keys is None or AgentId(signer) not in keys.snapshot().signing_keys:
        raise InvalidInputError(
            f"audit_signer {signer!r} needs its private key in keys_dir "
            "(an AgentIdentity with keyCustody: Cortex)", field="audit_signer")
    return recording.chain_sink(db, keys, signer)


def _checkpointer(settings: ServerSettings, db: Database, keys: KeySource | None,
                  registry: CollectorRegistry) -> Checkpointer | None:
    """The audit tree's checkpointer when the server has an audit signer (ADR 0099)."""
    key = _signer_key(settings, keys)
    if key is None or settings.audit_signer is None:
        return None
    cuts = settings.audit.checkpoints
    return Checkpointer(db, origin=cuts.origin or f"attested-cortex/{settings.audit_signer}",
                        key=key, every_events=cuts.every_events,
                        every_seconds=cuts.every_seconds, registry=registry,
                        witnesses=[(w.name, w.url) for w in settings.audit.witnesses])


def _signer_key(settings: ServerSettings,
                keys: KeySource | None) -> Callable[[], AgentKey | None] | None:
    """Look the ``audit_signer``'s private key up in the current key snapshot (keys
    rotate); ``None`` without a signer (checked by :func:`_audit_sink`)."""
    signer = settings.audit_signer
    if signer is None or keys is None:
        return None
    return lambda: keys.snapshot().signing_keys.get(AgentId(signer))


async def _start_sweepers(services: Services, settings: ServerSettings,
                          stack: AsyncExitStack) -> None:
    """Start the transcript sweeper (its first sweep runs at once), the re-sealing worker,
    the master key ring's reloader, the spoke-memory pending-receipt worker, the transfer
    expiry sweep and the approval service's listener and sweeper."""
    transcripts, approvals = services.transcripts, services.approvals
    if services.master_keys is not None and services.master_keys.watching:
        assert settings.master_key is not None  # a watched ring comes from master_key.dir
        reloader = RingReloader(services.master_keys,
                                interval_s=settings.master_key.reload_interval_ms / 1000,
                                db=services.db)
        reloader.start()
        stack.push_async_callback(reloader.aclose)
    if transcripts is not None:
        transcripts.start()
        stack.push_async_callback(transcripts.aclose)
    if services.resealer is not None:
        services.resealer.start()
        stack.push_async_callback(services.resealer.aclose)
    if services.read_recorder is not None:
        services.read_recorder.start()
        stack.push_async_callback(services.read_recorder.aclose)
    if services.checkpointer is not None:
        services.checkpointer.start()
        stack.push_async_callback(services.checkpointer.aclose)
    if services.pending is not None:
        services.pending.start()
        stack.push_async_callback(services.pending.aclose)
    if services.transfer_expiry is not None:
        services.transfer_expiry.start()
        stack.push_async_callback(services.transfer_expiry.aclose)
    if approvals is not None:
        await approvals.start(settings.database_url)
        stack.push_async_callback(approvals.aclose)
    if services.deliverer is not None:
        services.deliverer.start(settings.database_url)
        stack.push_async_callback(services.deliverer.aclose)


async def _outbox_present(db: Database) -> bool:
    """Whether writes append to the outbox: not on a schema older than 0038 (ADR 0106)."""
    async with db.connection() as conn:
        return await outbox.present(conn)


async def _open_vectors(
    settings: ServerSettings, db: Database, registry: CollectorRegistry
) -> Vectors:
    """The embedder the settings name and this database's vector state.

    A bad ``--embedder`` stops start-up with a clear message; a database without pgvector
    does not (recall stays full-text and capabilities say why). The embedded model is only
    loaded where its vectors can be stored.
    """
    e = settings.embedding
    if settings.embedder not in MODES and not \
            settings.embedder.startswith(("http://", "https://")):
        raise InvalidInputError(
            f"--embedder {settings.embedder!r}: use {', '.join(MODES)} or an http(s) URL",
            field="embedder")
    spec = settings.embedder if await vectors_available(db) else "none"
    try:
        embedder = build_embedder(spec, model=e.model, dimension=e.dimension,
                                  api_key_file=e.api_key_file,
                                  onnx=None if e.onnx is None else e.onnx.spec(e.model))
    except EmbeddingError as exc:
        raise InvalidInputError(str(exc), field="embedder") from exc
    tuning = VectorSettings(
        timeout_s=e.timeout_ms / 1000, batch=e.backfill_batch,
        pause_s=e.backfill_pause_ms / 1000, min_similarity=e.min_similarity,
        vector_pool=e.vector_pool, write_queue=e.write_queue,
        sealed=SealedNamespaces(tuple(settings.encryption.sealed_namespaces)),
    )
    return await open_vectors(db, embedder, settings=tuning, registry=registry)


async def _select_graph(conn: AnyConn, settings: ServerSettings) -> GraphBackend:
    """The graph backend the settings ask for, among those this database can run."""
    if await age_available(conn):
        await configure_age_connection(conn)
    return await select_backend(conn, settings.graph_backend)
