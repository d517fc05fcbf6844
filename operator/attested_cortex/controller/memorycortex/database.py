"""DatabaseReady: the managed PostgreSQL+AGE StatefulSet, or the external Secret's URI.

The objects are independent, so they are applied concurrently; the StatefulSet's apply
answer carries its status, so readiness costs no extra read.

The StatefulSet is applied with the claim template it already has (the API server refuses
any change to it); a larger ``storage.size`` grows the claim instead (builders/storage.py),
reported in ``StorageReady``.

The credentials Secret is generated once: read first, created only when absent, and a
create that loses a race (409) adopts the winner's. It is never regenerated.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.builders import networkpolicies, podparts, services, statefulsets, storage
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.applying import together
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiForbiddenError, ApiInvalidError

#: While an external Secret is missing, look again this often (reads only).
EXTERNAL_RETRY_S = 5.0
#: While a claim grows, look again this often (reads only; claims are not watched).
RESIZE_RETRY_S = 10.0


@dataclass(frozen=True)
class DatabaseOutcome:
    """DatabaseReady and where the URI lives."""

    condition: Observation
    connection_secret: str
    retry_in: float | None = None
    storage: Observation | None = None  # StorageReady, managed databases only
    #: The pod that takes writes, where the operator knows it (not for external).
    primary: str | None = None
    #: The CloudNativePG Cluster as the apply answered it (its status: backups, archiving).
    cluster: Mapping[str, Any] | None = None


async def ensure_credentials(rt: Runtime, cortex: Cortex) -> None:
    """Create the credentials Secret once; adopt an existing one."""
    await rt.create_once(lambda: secret_builders.build_db_credentials(
        cortex, secrets.token_urlsafe(24)), cortex.meta.namespace,
        n.db_secret_name(cortex.meta.name))


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
    ns = cortex.meta.namespace
    live, pvc = await together(
        rt.writer.get("apps/v1", "StatefulSet", ns, n.db_name(cortex.meta.name)),
        rt.writer.get("v1", "PersistentVolumeClaim", ns, storage.claim_name(cortex)))
    template = storage.live_template(live)
    _, _, _, sts, grown = await together(
        ensure_credentials(rt, cortex),
        rt.writer.apply(services.build_db_service(cortex)),
        rt.writer.apply(networkpolicies.build_db_network_policy(cortex)),
        rt.writer.apply(statefulsets.build_statefulset(cortex, rt.defaults,
                                                       live_claim_template=template)),
        _grow(rt, cortex, storage.claim_of(pvc)))
    secret = n.db_secret_name(cortex.meta.name)
    ready = int(((sts or {}).get("status") or {}).get("readyReplicas") or 0)
    retry = RESIZE_RETRY_S if grown.reason == "Resizing" else None
    if ready >= 1:
        return DatabaseOutcome(Observation.of("DatabaseReady", True, "DatabaseRunning",
                                              "the database pod is ready"), secret,
                               retry_in=retry, storage=grown,
                               primary=f"{n.db_name(cortex.meta.name)}-0")
    return DatabaseOutcome(Observation.of(
        "DatabaseReady", False, "DatabaseStarting",
        f"waiting for pod {n.db_name(cortex.meta.name)}-0 to be ready (and its volume "
        "claim to bind)"), secret, retry_in=retry, storage=grown)


async def _grow(rt: Runtime, cortex: Cortex, claim: storage.Claim | None) -> Observation:
    """Raise the claim's request when the spec asks for more; StorageReady either way."""
    planned = storage.plan(cortex, claim)
    if planned.grow_to is None or claim is None:
        return planned.condition
    try:
        await rt.writer.apply(storage.build_claim_resize(cortex, planned.grow_to))
    except (ApiInvalidError, ApiForbiddenError) as exc:  # no expansion in this StorageClass
        return storage.refused(cortex, claim, planned.grow_to, exc.message)
    return planned.condition
