"""Webhook delivery as the settings configure it (issue 41, ADR 0106/0107/0142). Called by
:mod:`.assembling` at start-up (delivery starts with the other workers, after start-up) and
by the delivery process (:mod:`.delivery`), which builds its deliverer from the same settings.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from attested_cortex.attest.sealing import Sealer
from attested_cortex.policy.targets import networks
from attested_cortex.server.settings import ServerSettings
from attested_cortex.service.workers.delivering import Declared, Deliverer, DeliverySettings
from attested_cortex.service.workers.webhooks import Limits
from attested_cortex.store.database import Database


def delivery_settings(settings: ServerSettings) -> DeliverySettings:
    """The deliverer's bounds and schedule from ``subscriptions`` in the settings."""
    s = settings.subscriptions
    ring = settings.master_key
    return DeliverySettings(
        # a watched ring is adopted at each process's own poll: wait two polls for it
        reopen_after_s=2 * ring.reload_interval_ms / 1000
        if ring is not None and ring.dir is not None else 0.0,
        retry_schedule_s=tuple(s.retry_schedule_seconds), retry_factor=s.retry_factor,
        retry_cap_s=s.retry_cap_seconds, max_attempts=s.max_attempts, batch=s.batch,
        retention_s=float(s.retention_seconds), allow_private=s.allow_private_targets,
        refused=networks(s.refused_cidrs),
        limits=Limits(connect_timeout_s=s.connect_timeout_ms / 1000,
                      total_timeout_s=s.total_timeout_ms / 1000,
                      max_response_bytes=s.max_response_bytes),
        declared=tuple(Declared(
            d.name, d.url, tuple(d.events), tuple(d.namespaces), d.secret_file,
            max_in_flight=d.max_in_flight, enabled=d.enabled,
            allow_private_targets=d.allow_private_targets) for d in s.declared))


def deliverer_from(settings: ServerSettings, db: Database, registry: CollectorRegistry,
                   sealer: Sealer | None = None) -> Deliverer | None:
    """The deliverer, or None when delivery is off (the outbox is still written); with the
    sealer that opens payloads sealed at rest. In this event loop: the server's when
    ``subscriptions.delivery`` is ``in_process``, the delivery process's otherwise (ADR 0142,
    :mod:`.assembling` chooses)."""
    if not settings.subscriptions.enabled:
        return None
    return Deliverer(db, delivery_settings(settings), registry=registry, sealer=sealer)
