"""CortexSubscription: its signing Secret generated once when it names none, then rendered
by the MemoryCortex controller into the server's ``subscriptions.declared`` with the Secret
mounted (ADR 0108); the server keeps it in its table and delivers. Called by the work queue
(:mod:`attested_cortex.controller.registry`).

Conditions: ``Accepted`` (parsed; a named Secret exists), ``CortexFound`` and ``InForce``
(the cortex's serving pods are ready for its current generation: the config carrying the
subscription is loaded), and ``Delivering`` with ``status.delivery`` (lag, last success and
failure, the failure's class, dead letters: ADR 0130), read from the cortex's public
delivery report every :data:`DELIVERY_POLL_S` and written only when it changed (an idle
subscription costs a read, never a write). The secret value never reaches status, events
or logs: status names the Secret only.
"""

from __future__ import annotations

import base64
import secrets as random
from typing import Any, Final

from attested_cortex.builders import deliverystates
from attested_cortex.builders.conditions import Observation, find, ready
from attested_cortex.builders.deployments import subscription_secret
from attested_cortex.builders.inputs import Subscription, parse_subscription
from attested_cortex.builders.secrets import build_webhook_secret
from attested_cortex.controller.cortexsubscription import deliveryreading
from attested_cortex.controller.opening import open_satellite
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND = "CortexSubscription"
#: How soon a subscription whose named Secret is missing is looked at again.
SECRET_RETRY_S: Final = 10.0
#: How often an in-force subscription's delivery state is read from its cortex (a status
#: write only when it changed: an idle subscription costs a read, never a write).
DELIVERY_POLL_S: Final = 30.0


def generated_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(random.token_bytes(32)).decode()


def in_force(cortex: dict[str, Any]) -> Observation:
    """Whether the cortex's serving pods run its current configuration."""
    status = cortex.get("status") or {}
    server = find(status.get("conditions"), "ServerReady") or {}
    current = server.get("observedGeneration") == cortex["metadata"].get("generation")
    if server.get("status") != "True" or not current:
        return Observation.of("InForce", False, "NotRunning",
                              "not yet loaded by every serving pod; the cortex says: "
                              f"{server.get('message') or 'nothing yet'}"[:1024])
    return Observation.of("InForce", True, "Loaded",
                          "in the configuration of every serving server pod")


async def _secret(rt: Runtime, subscription: Subscription) -> tuple[Observation, str]:
    name, _ = subscription_secret(subscription)
    namespace = subscription.meta.namespace
    if subscription.spec.secret_ref is None:
        await rt.create_once(lambda: build_webhook_secret(subscription, generated_secret()),
                             namespace, name)
        return Observation.of("Accepted", True, "SecretGenerated",
                              f"signing secret generated in Secret {name}"), name
    found = rt.views.get("Secret", namespace, name) is not None or \
        await rt.writer.get("v1", "Secret", namespace, name) is not None
    return Observation.of("Accepted", found, "SecretFound" if found else "SecretMissing",
                          f"signing secret in Secret {name}" if found else
                          f"Secret {name} does not exist"), name


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a CortexSubscription."""
    opened = await open_satellite(rt, key, parse_subscription, kind=KIND,
                                  invalid_type="Accepted", invalid_reason="Invalid")
    if opened is None:
        return None
    subscription = opened.resource
    accepted, secret_name = await _secret(rt, subscription)
    parts = [accepted, opened.located]
    if accepted.status == "True" and opened.cortex is not None:
        parts.append(in_force(opened.cortex))
    fields: dict[str, Any] = {"secretName": secret_name}
    delivering: list[Observation] = []
    loaded = parts[-1].type == "InForce" and parts[-1].status == "True"
    if loaded:
        report = await deliveryreading.report(rt, opened.cortex or {})
        if report is not None:  # unread: the status keeps what it showed
            shown, observed = deliverystates.delivery(report, subscription.meta.name)
            fields["delivery"] = shown
            delivering.append(observed)
    await write_status(rt.writer, kind=KIND, meta=subscription.meta, current=opened.status,
                       observed=[*parts, *delivering,
                                 ready(parts, ready_reason="InForce",
                                       ready_message="delivered by the cortex")],
                       fields=fields)
    if accepted.status != "True":
        return SECRET_RETRY_S
    return DELIVERY_POLL_S if loaded else None  # else the cortex's rollout wakes it



