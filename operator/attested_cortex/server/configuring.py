"""The server's settings turned into the values its parts are built from.

Each function reads one section of :class:`~.settings.ServerSettings` and answers the value
a part takes (the authenticator, the enforced limits, the policy, the approval service,
the transcript retention), refusing a bad setting with an :class:`InvalidInputError` that
names it. Called by :mod:`.assembling` (the composition root) and by tests that check one
translation without starting a server.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from prometheus_client import Gauge

from attested_cortex.attest.masterkeys import (
    REFUSED,
    Argon2Params,
    KeyRing,
    key_from_passphrase,
    load_key_file,
    load_ring_dir,
    unlike_recorded,
)
from attested_cortex.attest.sealing import Sealer
from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.policy.quotas import Buckets
from attested_cortex.policy.rules import RuleSet, compile_rules
from attested_cortex.policy.scopes import DEFAULT, ScopeSet
from attested_cortex.policy.tiers import TrustTier, ceilings
from attested_cortex.server.auth import (
    Authenticator,
    DevAuth,
    TokenAuth,
    check_dev_listen,
    parse_agent_id,
)
from attested_cortex.server.settings import ServerSettings, split_listen
from attested_cortex.service.pipeline.context import Policy
from attested_cortex.service.pipeline.limits import Limits
from attested_cortex.service.workers.approving import Approvals, HeldBounds, Recorder
from attested_cortex.store.database import Database
from attested_cortex.transcripts.retention import Retention, Rule
from attested_cortex.types import AgentId


def build_auth(settings: ServerSettings) -> Authenticator:
    """The authenticator the settings ask for."""
    hosts = [split_listen(a)[0] for a in settings.listen]
    if settings.auth == "dev":
        check_dev_listen(hosts)
        return DevAuth(tier=settings.trust.default_tier)
    if settings.auth == "tokens":
        if settings.tokens_file is None:
            raise InvalidInputError("--auth tokens needs --tokens-file", field="tokens_file")
        return TokenAuth.from_file(settings.tokens_file, default_tier=settings.trust.default_tier)
    from attested_cortex.server.auth_kubernetes import KubernetesAuth, client_review

    return KubernetesAuth(client_review(kubeconfig=settings.kubeconfig,
                                        audiences=settings.token_audiences),
                          agents=agent_map(settings), tiers=agent_tiers(settings),
                          default_tier=settings.trust.default_tier)


def agent_tiers(settings: ServerSettings) -> dict[str, TrustTier]:
    """The trust tiers the ``agents`` mapping names (service account -> tier)."""
    return {m.service_account: m.trust_tier for m in settings.agents
            if m.trust_tier is not None}


def agent_map(settings: ServerSettings) -> dict[str, tuple[AgentId, ScopeSet]]:
    """The ``agents`` mapping of the config (service account -> agent id and scopes)."""
    return {
        m.service_account: (parse_agent_id(m.agent_id),
                            ScopeSet.parse(m.scopes) if m.scopes is not None else DEFAULT)
        for m in settings.agents
    }


def limits_from(settings: ServerSettings) -> Limits:
    """The enforced limits."""
    return Limits(**settings.limits.model_dump(), write_timeout_ms=settings.db_write_timeout_ms)


def approvals_from(settings: ServerSettings, db: Database, policy: Policy, *,
                   record: Recorder, pending_gauge: Gauge | None = None,
                   sealer: Sealer | None = None) -> Approvals | None:
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
                                       config.retention_seconds),
                     record=record, pending_gauge=pending_gauge, sealer=sealer)


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
    """Rules, write default, quotas and trust ceilings from the settings (a bad rule
    pattern or ceiling mark is an error)."""
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
        ceilings=ceilings({t: dict(m) for t, m in settings.trust.ceilings.items()}),
    )


def check_at_rest_key(settings: ServerSettings, ring: KeyRing | None) -> None:
    """``encryption.at_rest`` on without a master key stops start-up: the operator would
    otherwise believe it encrypts."""
    if ring is None and settings.encryption.at_rest:
        raise InvalidInputError("encryption.at_rest needs a master key (master_key: dir, "
                                "file or passphrase_file; --master-key-file)",
                                field="encryption.at_rest")


def check_master_key(ring: KeyRing | None, recorded: Mapping[int, str] | None, *,
                     keyed: bool) -> None:
    """Refuse to start with a master key that is not the cortex's own, or without one where
    the cortex has one (ADR 0088, issue 37 item 14). ``recorded``: the fingerprint of each
    key version the cortex was sealed with (:mod:`attested_cortex.store.key_checks`; None
    before migration 0031); ``keyed``: the database holds something only a key makes (a
    recorded version, a MAC of the keyed chain, a row sealed at rest). Fingerprints are
    public (capabilities show them); the key never enters a message."""
    if ring is None:
        if keyed:
            versions = ", ".join(f"v{v}" for v in sorted(recorded or {})) or "unrecorded"
            raise InvalidInputError(
                f"{REFUSED}: this cortex was sealed with a master key (versions: {versions}) "
                "and the server has none: start refused (it would write plain rows and "
                "unkeyed audit events into a keyed cortex); configure master_key (dir, "
                "file or passphrase_file) or --master-key-file", field="master_key")
        return
    why = unlike_recorded(ring, recorded or {})
    if why is not None:
        raise InvalidInputError(f"{REFUSED}, start refused: {why}", field="master_key")


def sealer_from(settings: ServerSettings, ring: KeyRing | None,
                default: bool = False) -> Sealer | None:
    """What seals rows at rest and opens them (ADR 0056): with a master key, a sealer that
    seals new rows when ``encryption.at_rest`` is on (unset: ``default``, the cortex's own,
    ADR 0079) and opens sealed rows either way (rows sealed before it was turned off stay
    readable); on without a key: :func:`check_at_rest_key`'s refusal."""
    check_at_rest_key(settings, ring)
    if ring is None:
        return None
    at_rest = settings.encryption.at_rest
    return Sealer(ring, seals=default if at_rest is None else at_rest)


def key_ring_from(settings: ServerSettings) -> KeyRing | None:
    """The master key ring (ADR 0050): the mounted Secret, a key file or a passphrase;
    None when none is configured. Unreadable or malformed material stops start-up with a
    message naming the setting, never quoting the material. A passphrase costs one
    Argon2id run (the seed's 64 MiB, about a tenth of a second on one core)."""
    config = settings.master_key
    if config is None:
        return None
    if config.dir is not None:
        return load_ring_dir(config.dir)
    if config.file is not None:
        return load_key_file(config.file)
    assert config.passphrase_file is not None and config.salt is not None  # the validator's
    try:
        passphrase = config.passphrase_file.read_bytes().rstrip(b"\r\n")
    except OSError as exc:
        raise InvalidInputError(f"cannot read master_key.passphrase_file: {exc.strerror}",
                                field="master_key.passphrase_file") from exc
    params = Argon2Params(iterations=config.argon2_iterations,
                          memory_kib=config.argon2_memory_kib, lanes=config.argon2_lanes)
    return KeyRing.single(key_from_passphrase(passphrase, bytes.fromhex(config.salt), params))
