"""ServerReady: configuration, identity, Service and (once the schema is ready) the server.

The ConfigMap, ServiceAccount and Service are applied on every pass, concurrently, while
the database and schema steps run; the Deployment only after SchemaReady, so a server is
never created or rolled onto a schema it does not match. The TokenReview binding exists
exactly while the auth mode is Kubernetes; the PodDisruptionBudget exactly while there are
two replicas or more.
"""

from __future__ import annotations

import secrets
from typing import Any

from attested_cortex.builders import access, configmaps, deployments, rollout, services
from attested_cortex.builders import names as n
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.applying import together
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"


async def _approval_secret(rt: Runtime, cortex: Cortex) -> None:
    if not cortex.spec.approval.enabled or cortex.spec.approval.hmac_secret_ref is not None:
        return
    await rt.create_once(lambda: secret_builders.build_approval_secret(
        cortex, secrets.token_hex(32)), cortex.meta.namespace,
        n.approval_secret_name(cortex.meta.name))


async def _tokenreview_binding(rt: Runtime, cortex: Cortex) -> None:
    name = n.tokenreview_binding_name(cortex.meta.namespace, cortex.meta.name)
    if cortex.spec.server.auth.mode != "Kubernetes":
        await rt.writer.remove(RBAC, "ClusterRoleBinding", None, name)
        return
    uid = await rt.namespace_uid(cortex.meta.namespace)
    await rt.writer.apply(access.build_tokenreview_binding(cortex, rt.defaults, uid))


async def _disruption_budget(rt: Runtime, cortex: Cortex) -> None:
    if access.wants_disruption_budget(cortex):
        await rt.writer.apply(access.build_disruption_budget(cortex))
    else:
        await rt.writer.remove("policy/v1", "PodDisruptionBudget", cortex.meta.namespace,
                               n.server_name(cortex.meta.name))


async def prepare(rt: Runtime, cortex: Cortex, satellites: Satellites) -> None:
    """Everything but the Deployment, applied concurrently (they are independent)."""
    await together(
        rt.writer.apply(configmaps.build_config_map(cortex, satellites)),
        _approval_secret(rt, cortex),
        rt.writer.apply(access.build_service_account(cortex)),
        _tokenreview_binding(rt, cortex),
        rt.writer.apply(services.build_server_service(cortex)))


async def ensure(rt: Runtime, cortex: Cortex, satellites: Satellites, *,
                 schema_ready: bool) -> Observation:
    """The Deployment (only when ``schema_ready``) and the PodDisruptionBudget."""
    name = n.server_name(cortex.meta.name)
    deployment: Object | None
    if schema_ready:
        deployment, _ = await together(
            rt.writer.apply(deployments.build_deployment(cortex, rt.defaults, satellites)),
            _disruption_budget(rt, cortex))
    else:
        deployment = await rt.writer.get("apps/v1", "Deployment", cortex.meta.namespace, name)
    replicas = cortex.spec.server.replicas
    pods: list[Object] = []
    if deployment is not None and not rollout.is_complete(deployment, replicas):
        selector = ",".join(f"{k}={v}" for k, v in n.selector(cortex.meta.name, "server").items())
        pods = await rt.writer.list("v1", "Pod", cortex.meta.namespace, selector)
    return rollout.server_readiness(deployment, replicas, pods)
