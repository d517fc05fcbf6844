"""ServerReady: configuration, identity, Service and (once the schema is ready) the server.

The ConfigMap, ServiceAccount and Service are applied on every pass; the Deployment only
after SchemaReady, so a server is never created or rolled onto a schema it does not match.
The TokenReview binding exists exactly while the auth mode is Kubernetes; the
PodDisruptionBudget exactly while there are two replicas or more.
"""

from __future__ import annotations

import secrets
from typing import Any

from attested_cortex.builders import access, configmaps, deployments, services
from attested_cortex.builders import names as n
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.kubeapi import ConflictError
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"


async def _approval_secret(rt: Runtime, cortex: Cortex) -> None:
    if not cortex.spec.approval.enabled or cortex.spec.approval.hmac_secret_ref is not None:
        return
    name = n.approval_secret_name(cortex.meta.name)
    if await rt.writer.get("v1", "Secret", cortex.meta.namespace, name) is not None:
        return
    try:
        await rt.writer.create(secret_builders.build_approval_secret(
            cortex, secrets.token_hex(32)))
    except ConflictError:
        return


async def _tokenreview_binding(rt: Runtime, cortex: Cortex) -> None:
    name = n.tokenreview_binding_name(cortex.meta.namespace, cortex.meta.name)
    if cortex.spec.server.auth.mode != "Kubernetes":
        await rt.writer.remove(RBAC, "ClusterRoleBinding", None, name)
        return
    namespace = await rt.writer.get("v1", "Namespace", None, cortex.meta.namespace)
    uid = str(((namespace or {}).get("metadata") or {}).get("uid", ""))
    await rt.writer.apply(access.build_tokenreview_binding(cortex, rt.defaults, uid))


async def _disruption_budget(rt: Runtime, cortex: Cortex) -> None:
    if access.wants_disruption_budget(cortex):
        await rt.writer.apply(access.build_disruption_budget(cortex))
    else:
        await rt.writer.remove("policy/v1", "PodDisruptionBudget", cortex.meta.namespace,
                               n.server_name(cortex.meta.name))


def _readiness(deployment: Object | None, replicas: int) -> Observation:
    if deployment is None:
        return Observation.of("ServerReady", False, "WaitingForSchema",
                              "the server starts once the schema is ready")
    status = deployment.get("status") or {}
    generation = deployment["metadata"].get("generation", 0)
    current = int(status.get("observedGeneration") or 0) >= generation
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if replicas == 0 and current:
        return Observation.of("ServerReady", True, "ScaledToZero", "spec.server.replicas is 0")
    if current and updated >= replicas and available >= replicas:
        return Observation.of("ServerReady", True, "ServerAvailable",
                              f"{available}/{replicas} server pods available")
    return Observation.of("ServerReady", False, "ServerRollingOut",
                          f"{available}/{replicas} available, {updated} up to date")


async def ensure(rt: Runtime, cortex: Cortex, satellites: Satellites, *,
                 schema_ready: bool) -> Observation:
    """Apply the server's objects; the Deployment only when ``schema_ready``."""
    await rt.writer.apply(configmaps.build_config_map(cortex, satellites))
    await _approval_secret(rt, cortex)
    await rt.writer.apply(access.build_service_account(cortex))
    await _tokenreview_binding(rt, cortex)
    await rt.writer.apply(services.build_server_service(cortex))
    name = n.server_name(cortex.meta.name)
    if schema_ready:
        await rt.writer.apply(deployments.build_deployment(cortex, rt.defaults, satellites))
        await _disruption_budget(rt, cortex)
    deployment = await rt.writer.get("apps/v1", "Deployment", cortex.meta.namespace, name)
    return _readiness(deployment, cortex.spec.server.replicas)
