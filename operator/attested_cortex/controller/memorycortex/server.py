"""ServerReady: configuration, identity, Service and (once the schema is ready) the server.

The ConfigMap, ServiceAccount and Service are applied on every pass, concurrently, while
the database and schema steps run; the Deployment only after SchemaReady, so a server is
never created or rolled onto a schema it does not match. The TokenReview binding exists
exactly while the auth mode is Kubernetes; the PodDisruptionBudget exactly while there are
two replicas or more. The audit signer's key Secret is created once (ADR 0035), like the
approval HMAC key.

Before the Deployment is applied, every Secret its pods cannot start without is checked
(the tokens Secret, an approval HMAC Secret, the connection Secret, the embedding
endpoint's key Secret): a missing one stops the
roll and ServerReady says ``SecretMissing`` naming it, so the pods of the previous template
keep serving instead of new ones waiting in ``ContainerCreating`` forever (found on the
real node with a missing ``tokensSecretRef``). Secrets a user creates carry no label the
operator watches, so the pass comes back every :data:`SECRET_RETRY_S`. A Cortex-custody key
Secret that is gone, or that its identity reports edited by hand (``KeyMismatch``: the server
must neither sign with nor hold a key nobody rotated to), is not mounted at all
(builders/deployments.py) and the message says which identity the cortex cannot sign for.

While the cortex's satellites are still changing (a burst settling, controller/queueing.py)
a pass brought by another event leaves the Deployment as it is: the settled pass renders
every change of the burst into one rollout. Meanwhile (and while a new schema migrates)
ServerReady is not True but ``ChangesPending``: the status's ``ruleSummary`` already lists
what the pods do not run yet, and PermissionRules read "in force" from ServerReady.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Final

from attested_cortex.attest import keyfiles, masterkeys
from attested_cortex.attest.keys import generate_key
from attested_cortex.builders import access, configmaps, deployments, rollout, services, settings
from attested_cortex.builders import names as n
from attested_cortex.builders import secrets as secret_builders
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex, Identity
from attested_cortex.builders.podstates import required_secrets, template_hash
from attested_cortex.controller.applying import together
from attested_cortex.controller.memorycortex import federation
from attested_cortex.controller.runtime import Runtime
from attested_cortex.types import AgentId

Object = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"
#: While a Secret the server needs is missing, look again this often (index reads only).
SECRET_RETRY_S: Final = 5.0


@dataclass(frozen=True)
class ServerOutcome:
    """ServerReady, and when to look again (a Secret the pods need is missing)."""

    condition: Observation
    retry_in: float | None = None


async def _approval_secret(rt: Runtime, cortex: Cortex) -> None:
    if not cortex.spec.approval.enabled or cortex.spec.approval.hmac_secret_ref is not None:
        return
    await rt.create_once(lambda: secret_builders.build_approval_secret(
        cortex, secrets.token_hex(32)), cortex.meta.namespace,
        n.approval_secret_name(cortex.meta.name))


async def _audit_signer_secret(rt: Runtime, cortex: Cortex) -> None:
    """The audit signer's key, generated once: an existing Secret is never replaced, so a
    re-reconcile or an operator restart never changes the key the chain is signed with."""
    signer, name = settings.audit_signer(cortex), settings.audit_signer_secret(cortex)
    if signer is None or name is None:
        return
    uid = await rt.namespace_uid(cortex.meta.namespace)
    await rt.create_once(lambda: secret_builders.build_audit_signer_secret(
        cortex, keyfiles.identity_files(generate_key(AgentId(signer))), namespace_uid=uid),
        cortex.meta.namespace, name)


async def _master_key_secret(rt: Runtime, cortex: Cortex) -> None:
    """The master key, generated once (ADR 0050): never replaced, never regenerated while
    the Secret exists, never read back into status, events or logs."""
    uid = await rt.namespace_uid(cortex.meta.namespace)
    await rt.create_once(lambda: secret_builders.build_master_key_secret(
        cortex, masterkeys.ring_files({1: masterkeys.generate_key()}, current=1),
        namespace_uid=uid), cortex.meta.namespace, n.master_key_secret_name(cortex.meta.name))


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
        _audit_signer_secret(rt, cortex),
        _master_key_secret(rt, cortex),
        federation.prepare(rt, cortex),
        rt.writer.apply(access.build_service_account(cortex)),
        _tokenreview_binding(rt, cortex),
        rt.writer.apply(services.build_server_service(cortex)))


async def _exists(rt: Runtime, namespace: str, name: str) -> bool:
    """From the Secret index; asked of the API only when the index has not seen it yet."""
    if rt.views.get("Secret", namespace, name) is not None:
        return True
    return await rt.writer.get("v1", "Secret", namespace, name) is not None


def _mismatched(identity: Identity) -> bool:
    """The identity reports its key Secret edited by hand (``KeyMismatch``)."""
    return any(c.type == "KeyReady" and c.status == "False" and c.reason == "KeyMismatch"
               for c in identity.status.conditions or [])


async def _lost_keys(rt: Runtime, cortex: Cortex, satellites: Satellites) -> dict[str, str]:
    """Key Secret -> why the server must not sign with it: gone, or edited by hand."""
    lost = {}
    for identity in deployments.cortex_custody(satellites.identities):
        secret = str(identity.status.secret_name)
        who = f"AgentIdentity {identity.meta.name}"
        if _mismatched(identity):
            lost[secret] = f"{who} (key Secret {secret} was changed by hand: KeyMismatch)"
        elif not await _exists(rt, cortex.meta.namespace, secret):
            lost[secret] = f"{who} (key Secret {secret} is gone)"
    return lost


async def _missing(rt: Runtime, namespace: str, deployment: Object) -> list[str]:
    """'Secret X (what needs it)' for each Secret the pod template needs that is absent."""
    needed = required_secrets(deployment["spec"]["template"]["spec"])
    return [f"Secret {name} ({need})" for name, need in dict(needed).items()
            if not await _exists(rt, namespace, name)]


def _pending(deployment: Object | None, built: Object, *, held: bool,
             schema_ready: bool) -> str | None:
    """Why the live pod template is not the one just rendered, if it is not."""
    if deployment is None or template_hash(deployment) == template_hash(built):
        return None
    return "satellite changes are settling" if held else (
        "waiting for the schema" if not schema_ready else None)


def _verdict(observed: Observation, missing: list[str], lost: dict[str, str],
             pending: str | None) -> Observation:
    message = observed.message
    if lost:
        message += "; cannot sign for " + ", ".join(why for _, why in sorted(lost.items()))
    if missing:
        return Observation.of("ServerReady", False, "SecretMissing",
                              f"{', '.join(missing)} does not exist; the server is not rolled "
                              f"until it does; {message}"[:1024])
    if pending and observed.status == "True":  # what ruleSummary lists is not served yet
        return Observation.of("ServerReady", False, "ChangesPending",
                              f"the serving pods run an older template ({pending}); "
                              f"{message}"[:1024])
    return Observation.of("ServerReady", observed.status == "True", observed.reason,
                          message[:1024])


async def _roll_or_read(rt: Runtime, cortex: Cortex, built: Object, *,
                        roll: bool) -> Object | None:
    """Apply the Deployment (and the PDB) when ``roll``; else read the live one."""
    if roll:
        deployment, _ = await together(rt.writer.apply(built), _disruption_budget(rt, cortex))
        return dict(deployment)
    return await rt.writer.get("apps/v1", "Deployment", cortex.meta.namespace,
                               n.server_name(cortex.meta.name))


async def _pods(rt: Runtime, cortex: Cortex) -> list[Object]:
    selector = ",".join(f"{k}={v}" for k, v in n.selector(cortex.meta.name, "server").items())
    return await rt.writer.list("v1", "Pod", cortex.meta.namespace, selector)


async def ensure(rt: Runtime, cortex: Cortex, satellites: Satellites, *,
                 schema_ready: bool, blocked: Observation | None = None) -> ServerOutcome:
    """The Deployment (only when ``schema_ready``, its Secrets exist, no burst of satellite
    changes is settling and nothing ``blocked`` it: the TLS step's ServerReady, e.g.
    ``CertManagerMissing``) and the PDB; ServerReady from what runs."""
    ns = cortex.meta.namespace
    lost = await _lost_keys(rt, cortex, satellites)
    built = deployments.build_deployment(cortex, rt.defaults, satellites, frozenset(lost))
    missing = await _missing(rt, ns, built) if schema_ready else []
    held = rt.settling("MemoryCortex", ns, cortex.meta.name)  # the settled pass rolls
    deployment = await _roll_or_read(
        rt, cortex, built, roll=schema_ready and not missing and not held and blocked is None)
    pods = await _pods(rt, cortex) if deployment is not None else []
    observed = rollout.server_readiness(
        deployment, cortex.spec.server.replicas, pods,
        exists=lambda secret: rt.views.get("Secret", ns, secret) is not None)
    pending = _pending(deployment, built, held=held, schema_ready=schema_ready)
    if blocked is not None:
        return ServerOutcome(blocked)
    return ServerOutcome(_verdict(observed, missing, lost, pending),
                         SECRET_RETRY_S if missing else None)
