"""What the server can truthfully say about itself: readiness and capabilities.

Every value is read when asked (the schema version from the database, the graph backend
in use, the hooks loaded now), never copied from configuration intent: the seed's
"advertised but missing" findings are exactly what this module exists to prevent.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from attested_cortex.errors import CortexError, SchemaMissingError
from attested_cortex.policy.tiers import CALLER_TIERS
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline import usage
from attested_cortex.service.pipeline.attesting import snapshot
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import Call, run
from attested_cortex.service.resources import federation_status
from attested_cortex.service.workers.delivering import statuses
from attested_cortex.store import memory_resealing
from attested_cortex.store import subscriptions as subscription_rows
from attested_cortex.store import transcripts as transcript_rows
from attested_cortex.store.migrating import current_version
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA
from attested_cortex.transcripts import framing

#: readyz answers 503 within this bound even when the database host stopped answering.
READY_TIMEOUT_S = 0.8


async def schema_version(svc: Services) -> int:
    """The database's validated schema version (no wait for an unreachable database: a
    probe says so at once, ADR 0126)."""
    async with svc.db.connection(wait=False) as conn:
        return await current_version(conn)


async def readiness(svc: Services) -> tuple[bool, dict[str, Any]]:
    """Whether the database answers (within :data:`READY_TIMEOUT_S`) and its schema is the
    one this build expects."""
    checks: dict[str, Any] = {}
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            version = await schema_version(svc)
    except CortexError as exc:
        checks["database"] = {"ok": False, "message": exc.message}
        return False, checks
    except TimeoutError:
        checks["database"] = {"ok": False, "message": "the database did not answer within "
                              f"{READY_TIMEOUT_S * 1000:.0f} ms"}
        return False, checks
    checks["database"] = {"ok": True}
    current = version == MAX_SUPPORTED_SCHEMA
    checks["schema"] = {"ok": current, "version": version, "expected": MAX_SUPPORTED_SCHEMA}
    return current, checks


def attestation(svc: Services) -> dict[str, Any]:
    """Which agents' keys are live now (public facts only: ids and fingerprints)."""
    keys = snapshot(svc.keys)
    agents = sorted(keys.keyring.agents())
    return {
        "enabled": svc.keys is not None,
        "agent_keys": len(agents),
        "agents": agents[:100],
        "cortex_custody_agents": sorted(keys.signing_keys)[:100],
        "levels": ["unsigned", "self_signed", "peer_attested"],
        "keyed_chain": keyed_chain(svc),
        # issue 40: reads recorded as memory.access; receipts (`receipts: true` on a get,
        # a listing or a recall) need signed checkpoints, so an audit signer (ADR 0104)
        "read_records": svc.access_sink is not None,
        "receipts": svc.checkpointer is not None,
    }


def keyed_chain(svc: Services) -> dict[str, Any]:
    """Whether this server seals the audit chain with the master key (ADR 0051): without a
    key it works as before, appending events the keyed audit cannot tell from the role's."""
    ring = svc.key_ring
    if ring is None:
        return {"enabled": False, "reason": "no master key: events are hash-chained only "
                "and the deep audit cannot tell the server's records from the database "
                "role's"}
    return {"enabled": True, "key_version": ring.current, "mac": "HMAC-SHA256"}


def recall_capabilities(svc: Services) -> dict[str, Any]:
    """Recall mode, embedder and backfill progress, as the server runs them now."""
    if svc.vectors is None:
        return {"mode": "fulltext", "reason": "vector state not opened", "embedder": None,
                "vector_extension": False, "vector_index": None, "backfill": None,
                "write_behind": None}
    described: dict[str, Any] = svc.vectors.describe()
    return described


def permissions(svc: Services) -> dict[str, Any]:
    """The mode and the rules in force, one line each in evaluation order."""
    rules = sorted(svc.policy.rules.rules, key=lambda r: (-r.priority, r.order))
    return {
        "mode": svc.permission_mode,
        "write_default": svc.policy.write_default,
        "rules": len(rules),
        "rule_summary": [rule.summary() for rule in rules],
        "ownership": "author-only updates and deletes; observer-only invalidation",
    }


def trust(svc: Services, caller: Caller | None) -> dict[str, Any]:
    """The tier ceilings (ADR 0049) and, for the caller, its tier and effective scopes."""
    answer: dict[str, Any] = {"ceilings": {tier: svc.policy.ceilings[tier].describe()
                                           for tier in CALLER_TIERS}}
    if caller is not None:
        held = caller.held if caller.held is not None else caller.scopes
        answer["you"] = {"tier": caller.tier,
                         "effective_scopes": [str(s) for s in caller.scopes.scopes],
                         "held_scopes": [str(s) for s in held.scopes]}
    return answer


async def quotas(svc: Services, caller: Caller | None) -> dict[str, Any]:
    """Quota settings and, for the caller, live usage."""
    policy = svc.policy
    answer: dict[str, Any] = {
        "enabled": policy.buckets is not None,
        "requests_per_second": policy.buckets.rate if policy.buckets else None,
        "storage_per_agent_bytes": policy.storage_per_agent_bytes,
        "rate_scope": "per replica", "storage_scope": "global",
    }
    if caller is not None:
        used = await usage.stored(svc, caller.agent_id)
        answer["you"] = {
            "agent_id": caller.agent_id,
            "requests_per_second": policy.buckets.rate_of(caller.agent_id)
            if policy.buckets else None,
            "tokens_left": round(policy.buckets.level(caller.agent_id, now=time.monotonic()), 3)
            if policy.buckets else None,
            "stored_bytes": used.total,
            "stored_bytes_by_kind": {"memories": used.memories,
                                     "transcripts": used.transcripts, "spoke": used.spoke},
            "storage_limit_bytes": policy.storage_limit(caller.agent_id),
            "scopes": [str(s) for s in caller.scopes.scopes],
        }
    return answer


async def approval(svc: Services) -> dict[str, Any]:
    """Whether the approval API is on, and what waits."""
    approvals = svc.approvals
    if approvals is None:
        return {"enabled": False, "reason": "approval.enabled is false"}
    if not approvals.enabled:
        return {"enabled": False, "reason": "no approval.hmac_secret_file: decisions would "
                "be unauthenticated, so the API is off (AskUser in enforce mode is 403)"}
    return {"enabled": True, "pending": await approvals.count_pending(),
            "timeout_seconds": approvals.timeout_s, "subscribers": approvals.subscribers,
            "max_held_per_agent": approvals.bounds.max_actions,
            "max_held_bytes_per_agent": approvals.bounds.max_request_bytes,
            "retention_seconds": approvals.bounds.retention_s,
            "completion": "resubmit the held request with X-Cortex-Approval: <id>",
            "signature": "X-Cortex-Signature: sha256=HMAC(secret, "
                         "'{timestamp}.{METHOD}.{path}.{body}'), X-Cortex-Timestamp"}


async def transcripts_state(svc: Services) -> dict[str, Any]:
    """Where transcripts are on, the retention in force and the live counts."""
    state = svc.transcripts
    if state is None:
        return {"enabled": False, "namespaces": []}
    policy = state.retention
    counts: dict[str, int] | None = None
    try:
        async with svc.db.connection() as conn:
            counts = await transcript_rows.counts(conn)
    except SchemaMissingError:  # a database not migrated to 0008 yet: no counts to report
        counts = None
    return {"enabled": policy.enabled, "namespaces": policy.describe(),
            "default_retention_days": policy.default_retention_days,
            "prune_after_days": policy.prune_after_days, "max_bytes": policy.max_bytes,
            "compression": {"codec": "zstd", "level": framing.LEVEL},
            "counts": counts, "sweeper": {
                "running": state.running, "interval_seconds": policy.sweep_interval_s,
                "last": state.last_sweep.as_json() if state.last_sweep else None}}


async def encryption(svc: Services) -> dict[str, Any]:
    """Encryption at rest (ADR 0056): whether new rows are sealed, the key ring (versions and
    fingerprints only), the transcript frames held per key version ("plain": unsealed), the
    versions in use the ring lacks, and the re-sealing worker's progress."""
    sealer = svc.sealer
    frames: dict[str, int] | None = None
    memories: dict[str, int] | None = None
    legacy: int | None = None
    lacking: list[str] = []
    if sealer is not None:
        found: dict[int | None, int] | None = None
        held: dict[int | None, int] | None = None
        try:
            async with svc.db.connection() as conn:
                found = await transcript_rows.sealed_counts(conn)
                held = await memory_resealing.sealed_counts(conn)
                legacy = await memory_resealing.legacy_tokens_held(conn)
        except SchemaMissingError:  # not migrated to 0015 (0020, 0027) yet
            pass
        frames, memories = _by_version(found), _by_version(held)
        used = {*(found or {}), *(held or {})}
        lacking = sorted(f"v{v}" for v in used if v is not None and v not in sealer.ring.keys)
    return {"at_rest": sealer is not None and sealer.seals,
            #: ``settings``, or ``cortex default``: the setting unset, decided at the
            #: cortex's first start with a master key and kept in its database (ADR 0079)
            "at_rest_from": svc.at_rest_from,
            "cipher": "ChaCha20-Poly1305 (IETF, 96-bit random nonce)",
            "sealed": ["transcripts.frame", "memories.title", "memories.content",
                       "memories.metadata"],
            "search": "keyed blind tokens (HMAC-SHA256 of each lexeme) for sealed memories",
            "vectors": "plain: embeddings reveal meaning and are not encrypted (ADR 0057), "
                       "except in sealed namespaces, which keep none",
            #: ADR 0057 item 2: per pattern, what its memories keep and how they are recalled.
            "sealed_namespaces": [
                {"pattern": p, "vectors": "none",
                 "recall": "full-text over keyed blind tokens"
                 if sealer is not None and sealer.seals else "full-text"}
                for p in (svc.vectors.settings.sealed.patterns if svc.vectors else ())],
            "master_key": svc.key_ring.describe() if svc.key_ring is not None else None,
            #: Whether the ring follows its Secret, how often it was reloaded, a refusal.
            "master_key_reload": (svc.master_keys.as_json() if svc.master_keys is not None
                                  else None),
            "transcript_frames_by_key_version": frames,
            "memories_by_key_version": memories,
            #: Sealed memories still keyed in the legacy token form (before migration 0027,
            #: ADR 0078): the re-sealing worker re-keys them; recall finds them meanwhile.
            "memories_with_legacy_tokens": legacy,
            #: Versions rows are sealed under that the ring lacks: those rows are unreadable
            #: until the version is put back into the Secret.
            "versions_missing_from_ring": lacking,
            "resealer": svc.resealer.as_json() if svc.resealer is not None else None}


def _by_version(found: dict[int | None, int] | None) -> dict[str, int] | None:
    """Counts by key version, "plain" first, then oldest first."""
    if found is None:
        return None
    return {("plain" if v is None else f"v{v}"): n for v, n in sorted(
        found.items(), key=lambda item: -1 if item[0] is None else item[0])}


class CapabilitiesCall(Call[dict[str, Any]]):
    """``GET /v1/capabilities`` through the pipeline (no scope needed)."""

    spec = ops.CAPABILITIES

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        return await capabilities(svc, caller)


async def describe(svc: Services, caller: Caller) -> dict[str, Any]:
    """The capabilities document for ``caller``."""
    return await run(svc, caller, CapabilitiesCall())


async def capabilities(svc: Services, caller: Caller | None = None) -> dict[str, Any]:
    """The live capabilities document (``GET /v1/capabilities``, ``cortexctl doctor``)."""
    hooks = dict(svc.hooks.describe()) if svc.hooks is not None else {"by_event": {}}
    return {
        "schema_version": await schema_version(svc),
        "max_supported_schema": MAX_SUPPORTED_SCHEMA,
        "kg_backend": svc.graph.name if svc.graph is not None else None,
        "recall": recall_capabilities(svc),
        "auth": {"mode": svc.auth_mode},
        "permissions": permissions(svc),
        "hooks": hooks,
        "transcripts": await transcripts_state(svc),
        "encryption": await encryption(svc),
        "attestation": attestation(svc),
        "quotas": await quotas(svc, caller),
        "trust": trust(svc, caller),
        "approval": await approval(svc),
        "limits": svc.limits.as_dict(),
        "mcp": mcp(svc),
        "spoke_memory": {"pending": svc.pending.as_json() if svc.pending is not None
                         else None,
                         "transfer_expiry": svc.transfer_expiry.as_json()
                         if svc.transfer_expiry is not None else None},
        "subscriptions": await subscriptions(svc),
        "federation": await federation_status.senders(svc),
    }


async def subscriptions(svc: Services) -> dict[str, Any]:
    """The outbox and each subscription's delivery state: lag, last success and failure,
    dead letters, whether it fell behind the retention bound (ADR 0106). Never a secret."""
    if not svc.outbox:
        return {"enabled": False, "reason": "the database is older than migration 0038"}
    deliverer = svc.deliverer
    async with svc.db.connection() as conn:
        found = await subscription_rows.listed(conn)
        if deliverer is None:
            return {"enabled": True, "delivering": False, "subscriptions": [
                {"name": s.name, "enabled": s.enabled} for s in found]}
        states = await statuses(conn, deliverer, found)
    return {"enabled": True, "delivering": deliverer.running,
            "retention_seconds": deliverer.settings.retention_s,
            "subscriptions": [{"name": s.name, "enabled": s.enabled, **state}
                              for s, state in zip(found, states, strict=True)]}


def mcp(svc: Services) -> dict[str, Any]:
    """The MCP endpoint as the server mounted it (path, transport, protocol versions, open
    sessions), or disabled when this process serves none."""
    describe = svc.mcp
    if describe is None:
        return {"enabled": False, "reason": "no MCP endpoint is mounted in this process"}
    return describe()
