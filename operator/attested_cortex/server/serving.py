"""Start-up and shutdown of the server process (``cortexctl serve``).

Order: settings -> authentication (dev mode refused off loopback) -> database pool ->
schema check (refuse a newer or altered schema; an older one serves but is not ready
until migrated) -> graph backend -> hooks -> embedder and vector state (the backfill
starts in the background) -> transcript retention (its sweeper, likewise) ->
application -> listeners. Shutdown on SIGINT/SIGTERM closes listeners, hooks and the pool.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.loading import KeySource
from attested_cortex.embedding.base import EmbeddingError
from attested_cortex.embedding.choosing import build_embedder
from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.dispatching import open_pipeline
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.policy.quotas import Buckets
from attested_cortex.policy.rules import RuleSet, compile_rules
from attested_cortex.policy.scopes import DEFAULT, ScopeSet
from attested_cortex.server.app import build_app
from attested_cortex.server.auth import (
    Authenticator,
    DevAuth,
    TokenAuth,
    check_dev_listen,
    parse_agent_id,
)
from attested_cortex.server.connections import CortexRunner
from attested_cortex.server.settings import ServerSettings, split_listen
from attested_cortex.service.pipeline import recording
from attested_cortex.service.pipeline.context import Policy, Services
from attested_cortex.service.pipeline.limits import Limits
from attested_cortex.service.workers.approving import Approvals, HeldBounds
from attested_cortex.service.workers.embedding import (
    Vectors,
    VectorSettings,
    close_vectors,
    open_vectors,
    vectors_available,
)
from attested_cortex.service.workers.transcript_sweeping import Transcripts
from attested_cortex.store.database import AnyConn, Conn, Database, single_connection
from attested_cortex.store.embeddings import session_settings
from attested_cortex.store.graph.age_setup import age_available, configure_age_connection
from attested_cortex.store.graph.base import GraphBackend
from attested_cortex.store.graph.selecting import select_backend
from attested_cortex.store.migrating import current_version
from attested_cortex.transcripts.retention import Retention, Rule
from attested_cortex.types import AgentId

log = logging.getLogger(__name__)


def build_auth(settings: ServerSettings) -> Authenticator:
    """The authenticator the settings ask for."""
    hosts = [split_listen(a)[0] for a in settings.listen]
    if settings.auth == "dev":
        check_dev_listen(hosts)
        return DevAuth()
    if settings.auth == "tokens":
        if settings.tokens_file is None:
            raise InvalidInputError("--auth tokens needs --tokens-file", field="tokens_file")
        return TokenAuth.from_file(settings.tokens_file)
    from attested_cortex.server.auth_kubernetes import KubernetesAuth, client_review

    return KubernetesAuth(client_review(kubeconfig=settings.kubeconfig,
                                        audiences=settings.token_audiences),
                          agents=agent_map(settings))


def agent_map(settings: ServerSettings) -> dict[str, tuple[AgentId, ScopeSet]]:
    """The ``agents`` mapping of the config (service account -> agent id and scopes)."""
    return {
        m.service_account: (parse_agent_id(m.agent_id),
                            ScopeSet.parse(m.scopes) if m.scopes is not None else DEFAULT)
        for m in settings.agents
    }


def limits_from(settings: ServerSettings) -> Limits:
    """The enforced limits."""
    return Limits(**settings.limits.model_dump())


async def open_services(settings: ServerSettings, stack: AsyncExitStack) -> Services:
    """Check the schema, pick the graph backend, open the pool; ``stack`` closes them."""
    async with single_connection(settings.database_url) as first:
        await current_version(first)  # refuses a newer or altered schema
        graph = await _select_graph(first, settings)
    vector_session = session_settings(settings.embedding.vector_pool)

    async def configure(conn: Conn) -> None:
        if graph.name == "age":
            await configure_age_connection(conn)
        await vector_session(conn)

    db = await Database.open(settings.database_url, max_size=settings.pool_max_size,
                             configure=configure,
                             lock_timeout_s=settings.db_lock_timeout_ms / 1000,
                             statement_timeout_s=settings.db_statement_timeout_ms / 1000)
    stack.push_async_callback(db.close)
    registry = CollectorRegistry()
    hooks = await open_pipeline(settings.hooks_file, registry=registry)
    stack.push_async_callback(hooks.aclose)
    keys = KeySource(settings.keys_dir) if settings.keys_dir is not None else None
    if keys is not None:
        keys.snapshot()  # unreadable or inconsistent key files stop start-up, loudly
    policy = policy_from(settings)
    approvals = approvals_from(settings, db, policy)
    extras: dict[str, Any] = {}
    vectors = await _open_vectors(settings, db, registry)
    stack.push_async_callback(close_vectors, vectors)
    transcripts = Transcripts(db, retention_from(settings))
    services = Services(
        db=db, limits=limits_from(settings), graph=graph, hooks=hooks,
        permission_mode=settings.permissions.mode, auth_mode=settings.auth,
        metrics_registry=registry, keys=keys, policy=policy, approvals=approvals,
        extras=extras, vectors=vectors, transcripts=transcripts,
    )
    if settings.audit_signer is not None:
        if keys is None or AgentId(settings.audit_signer) not in keys.snapshot().signing_keys:
            raise InvalidInputError(
                f"audit_signer {settings.audit_signer!r} needs its private key in keys_dir "
                "(an AgentIdentity with keyCustody: Cortex)", field="audit_signer")
        extras["audit_sink"] = recording.chain_sink(services, settings.audit_signer)
        transcripts.audit_key = _key_of(keys, AgentId(settings.audit_signer))
    transcripts.start()  # after its audit key: the first sweep runs at once
    stack.push_async_callback(transcripts.aclose)
    if approvals is not None:
        approvals.record = recording.approval_recorder(services)
        await approvals.start(settings.database_url)
        stack.push_async_callback(approvals.aclose)
    return services


def _key_of(keys: KeySource, agent_id: AgentId) -> Callable[[], AgentKey | None]:
    """Look ``agent_id``'s private key up in the current key snapshot (keys rotate)."""
    return lambda: keys.snapshot().signing_keys.get(agent_id)


def approvals_from(settings: ServerSettings, db: Database, policy: Policy) -> Approvals | None:
    """The approval service; without a secret it exists but refuses (never open)."""
    config = settings.approval
    if not config.enabled:
        return None
    secret = None
    if config.hmac_secret_file is not None:
        try:
            secret = config.hmac_secret_file.read_bytes().strip()
        except OSError as exc:
            raise InvalidInputError(f"cannot read approval.hmac_secret_file: {exc.strerror}",
                                    field="approval.hmac_secret_file") from exc
        if len(secret) < 16:
            raise InvalidInputError("the approval secret must be at least 16 bytes",
                                    field="approval.hmac_secret_file")
    return Approvals(db=db, secret=secret, timeout_s=config.timeout_seconds,
                     rules=policy.rules, sweep_interval_s=config.sweep_interval_seconds,
                     bounds=HeldBounds(config.max_held_per_agent,
                                       config.max_held_bytes_per_agent,
                                       config.retention_seconds))


def retention_from(settings: ServerSettings) -> Retention:
    """The transcript policy: each namespace pattern (a bad one is an error) with its own
    retention or the cortex-wide one; no patterns: every namespace."""
    config = settings.transcripts
    listed = [(n.namespace, n.retention_days) for n in config.namespaces] or [("**", None)]
    rules = []
    for pattern, days in listed:
        segments = parse_pattern(pattern)
        rules.append(Rule(pattern, days if days is not None else config.retention_days,
                          functools.partial(matches, segments)))
    return Retention(enabled=config.enabled, rules=tuple(rules),
                     default_retention_days=config.retention_days,
                     prune_after_days=config.prune_after_days, max_bytes=config.max_bytes,
                     sweep_interval_s=config.sweep_interval_seconds)


def policy_from(settings: ServerSettings) -> Policy:
    """Rules, write default and quotas from the settings (a bad rule pattern is an error)."""
    quotas = settings.quotas
    rates = {q.agent_id: float(q.requests_per_second) for q in quotas.per_agent
             if q.requests_per_second is not None}
    return Policy(
        rules=RuleSet(compile_rules(settings.permissions.rules)),
        write_default=settings.permissions.write_default,
        buckets=Buckets(float(quotas.requests_per_second), rates) if quotas.enabled else None,
        storage_per_agent_bytes=quotas.storage_per_agent_bytes,
        storage_overrides={q.agent_id: q.storage_bytes for q in quotas.per_agent
                           if q.storage_bytes is not None},
    )


async def _open_vectors(
    settings: ServerSettings, db: Database, registry: CollectorRegistry
) -> Vectors:
    """The embedder the settings name and this database's vector state.

    A bad ``--embedder`` stops start-up with a clear message; a database without pgvector
    does not (recall stays full-text and capabilities say why). The embedded model is only
    loaded where its vectors can be stored.
    """
    e = settings.embedding
    if settings.embedder not in ("default", "none", "client") and not \
            settings.embedder.startswith(("http://", "https://")):
        raise InvalidInputError(
            f"--embedder {settings.embedder!r}: use default, none, client or an http(s) URL",
            field="embedder")
    spec = settings.embedder if await vectors_available(db) else "none"
    try:
        embedder = build_embedder(spec, model=e.model, dimension=e.dimension,
                                  api_key_file=e.api_key_file)
    except EmbeddingError as exc:
        raise InvalidInputError(str(exc), field="embedder") from exc
    tuning = VectorSettings(
        timeout_s=e.timeout_ms / 1000, batch=e.backfill_batch,
        pause_s=e.backfill_pause_ms / 1000, min_similarity=e.min_similarity,
        vector_pool=e.vector_pool, write_queue=e.write_queue,
    )
    return await open_vectors(db, embedder, settings=tuning, registry=registry)


async def _select_graph(conn: AnyConn, settings: ServerSettings) -> GraphBackend:
    if await age_available(conn):
        await configure_age_connection(conn)
    return await select_backend(conn, settings.graph_backend)


def freeze_startup_heap() -> None:
    """Take what start-up allocated out of the garbage collector's sight (``gc.freeze``).

    Modules, settings, the application and its routes live as long as the process; without
    this every full collection walks them again, and one landing inside a request added tens
    of milliseconds to it (measured on kg/query: docs/benchmarks/kg.json, ADR 0006).
    """
    gc.collect()
    gc.freeze()


async def run_server(settings: ServerSettings, *, ready: asyncio.Event | None = None) -> None:
    """Serve until SIGINT/SIGTERM."""
    auth = build_auth(settings)
    async with AsyncExitStack() as stack:
        services = await open_services(settings, stack)
        app = build_app(services, auth=auth)
        runner = CortexRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        for address in settings.listen:
            host, port = split_listen(address)
            await web.TCPSite(runner, host, port, shutdown_timeout=5).start()
            log.info("listening", extra={"address": f"http://{address}", "auth": auth.mode})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        freeze_startup_heap()
        if ready is not None:
            ready.set()
        await stop.wait()
        log.info("shutting down")
