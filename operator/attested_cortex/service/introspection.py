"""What the server can truthfully say about itself: readiness and capabilities.

Every value is read when asked (the schema version from the database, the graph backend
in use, the hooks loaded now), never copied from configuration intent: the seed's
"advertised but missing" findings are exactly what this module exists to prevent.
"""

from __future__ import annotations

from typing import Any

from attested_cortex.errors import CortexError
from attested_cortex.service.attesting import snapshot
from attested_cortex.service.context import Services
from attested_cortex.store.migrating import current_version
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA


async def schema_version(svc: Services) -> int:
    """The database's validated schema version."""
    async with svc.db.connection() as conn:
        return await current_version(conn)


async def readiness(svc: Services) -> tuple[bool, dict[str, Any]]:
    """Whether the database answers and its schema is the one this build expects."""
    checks: dict[str, Any] = {}
    try:
        version = await schema_version(svc)
    except CortexError as exc:
        checks["database"] = {"ok": False, "message": exc.message}
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
    }


def recall_capabilities(svc: Services) -> dict[str, Any]:
    """Recall mode, embedder and backfill progress, as the server runs them now."""
    if svc.vectors is None:
        return {"mode": "fulltext", "reason": "vector state not opened", "embedder": None,
                "vector_extension": False, "vector_index": None, "backfill": None}
    described: dict[str, Any] = svc.vectors.describe()
    return described


async def capabilities(svc: Services) -> dict[str, Any]:
    """The live capabilities document (``GET /v1/capabilities``, ``cortexctl doctor``)."""
    hooks = dict(svc.hooks.describe()) if svc.hooks is not None else {"by_event": {}}
    return {
        "schema_version": await schema_version(svc),
        "max_supported_schema": MAX_SUPPORTED_SCHEMA,
        "kg_backend": getattr(svc.graph, "name", None),
        "recall": recall_capabilities(svc),
        "auth": {"mode": svc.auth_mode},
        "permissions": {"mode": svc.permission_mode, "rule_summary": [], "rules": 0},
        "hooks": hooks,
        "transcripts": {"enabled": False},
        "attestation": attestation(svc),
        "quotas": {"enabled": False},
        "limits": svc.limits.as_dict(),
    }
