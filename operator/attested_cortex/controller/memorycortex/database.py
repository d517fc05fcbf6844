"""DatabaseReady: the managed PostgreSQL+AGE StatefulSet, or the external Secret's URI.

The credentials Secret is generated once: read first, created only when absent, and a
create that loses a race (409) adopts the winner's. It is never regenerated.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from attested_cortex.builders import names as n
from attested_cortex.builders import networkpolicies, podparts, services, statefulsets
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.kubeapi import ConflictError
from attested_cortex.controller.runtime import Runtime

#: While an external Secret is missing, look again this often (reads only).
EXTERNAL_RETRY_S = 5.0


@dataclass(frozen=True)
class DatabaseOutcome:
    """DatabaseReady and where the URI lives."""

    condition: Observation
    connection_secret: str
    retry_in: float | None = None


async def ensure_credentials(rt: Runtime, cortex: Cortex) -> None:
    """Create the credentials Secret once; adopt an existing one."""
    name = n.db_secret_name(cortex.meta.name)
    if await rt.writer.get("v1", "Secret", cortex.meta.namespace, name) is not None:
        return
    password = secrets.token_urlsafe(24)
    try:
        await rt.writer.create(secret_builders.build_db_credentials(cortex, password))
    except ConflictError:
        return  # created meanwhile (another pass, a previous operator): adopt it


async def _external(rt: Runtime, cortex: Cortex) -> DatabaseOutcome:
    name, key = podparts.connection_secret(cortex)
    secret = await rt.writer.get("v1", "Secret", cortex.meta.namespace, name)
    if secret is None or key not in (secret.get("data") or {}):
        what = "does not exist" if secret is None else f"has no key {key!r}"
        return DatabaseOutcome(Observation.of(
            "DatabaseReady", False, "ConnectionSecretMissing",
            f"Secret {name} {what}; create it with a postgresql:// URI"), name,
            retry_in=EXTERNAL_RETRY_S)
    return DatabaseOutcome(Observation.of("DatabaseReady", True, "ExternalDatabase",
                                          f"connection URI from Secret {name}"), name)


async def ensure(rt: Runtime, cortex: Cortex) -> DatabaseOutcome:
    """Apply the managed database's objects (or check the external Secret)."""
    if cortex.spec.database.managed is None:
        return await _external(rt, cortex)
    await ensure_credentials(rt, cortex)
    for obj in (services.build_db_service(cortex),
                networkpolicies.build_db_network_policy(cortex),
                statefulsets.build_statefulset(cortex, rt.defaults)):
        await rt.writer.apply(obj)
    secret = n.db_secret_name(cortex.meta.name)
    sts = await rt.writer.get("apps/v1", "StatefulSet", cortex.meta.namespace,
                              n.db_name(cortex.meta.name))
    ready = int(((sts or {}).get("status") or {}).get("readyReplicas") or 0)
    if ready >= 1:
        return DatabaseOutcome(Observation.of("DatabaseReady", True, "DatabaseRunning",
                                              "the database pod is ready"), secret)
    return DatabaseOutcome(Observation.of(
        "DatabaseReady", False, "DatabaseStarting",
        f"waiting for pod {n.db_name(cortex.meta.name)}-0 to be ready (and its volume "
        "claim to bind)"), secret)
