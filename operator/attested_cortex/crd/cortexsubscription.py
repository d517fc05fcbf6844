"""CortexSubscription: a webhook target receiving a MemoryCortex's events (issue 41,
ADR 0108), as spec and status models.

The operator renders the accepted subscriptions of a cortex into its server configuration
(``subscriptions.declared``) with their Secrets mounted, and the server keeps them in its
table (``managed_by: config``). ``secretRef`` names the Standard Webhooks secret
(``whsec_...``); without it the operator generates a Secret once. Read by the renderer
(``kinds``), the builders and the CortexSubscription controller.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attested_cortex.crd.common import CommonStatus, CortexReference, CrdModel, SecretKeyReference
from attested_cortex.crd.permissionrule import namespace_pattern_extra

MAX_SUBSCRIBED_PATTERN = 128

#: Shorter than a PermissionRule's (512) and at most 16: the CEL cost of the pattern rules
#: over the whole list stays within the API server's budget.
NamespacePattern = Annotated[str, Field(min_length=1, max_length=MAX_SUBSCRIBED_PATTERN,
                                        json_schema_extra=namespace_pattern_extra())]
#: The events a subscription may receive (what the outbox carries, ADR 0106).
SubscribedEvent = Literal["post_store", "post_update", "post_delete", "post_link",
                          "post_invalidate", "post_transcript_store", "pre_approval",
                          "post_approval", "post_spoke_write", "*"]


class WebhookSecretReference(SecretKeyReference):
    """The Secret key holding the Standard Webhooks secret."""

    key: str = Field(default="secret", description="Key inside the Secret.", min_length=1,
                     max_length=253)


class CortexSubscriptionSpec(CrdModel):
    """Desired state of a CortexSubscription."""

    cortex_ref: CortexReference = Field(description="The MemoryCortex whose events it gets.")
    url: str = Field(
        description="http(s) target. Loopback, link-local, private and cluster addresses "
        "are refused unless allowPrivateTargets.", min_length=1, max_length=2048,
        json_schema_extra={"x-kubernetes-validations": [{
            "rule": "self.startsWith('https://') || self.startsWith('http://')",
            "message": "url must be http:// or https://"}]})
    events: list[SubscribedEvent] = Field(
        description="post_* events to deliver; '*' for all.", min_length=1, max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "set"})
    namespaces: list[NamespacePattern] = Field(
        default_factory=lambda: ["**"], max_length=16,
        description="Memory-namespace patterns of the events delivered (links have no "
        "namespace: every subscription to their events gets them).")
    secret_ref: WebhookSecretReference | None = Field(
        default=None, description="The signing secret (whsec_...); absent: the operator "
        "generates the Secret <name>-webhook once.")
    max_in_flight: int = Field(default=4, ge=1, le=64,
                               description="Deliveries in flight at once.")
    enabled: bool = Field(default=True, description="Deliver at all.")
    allow_private_targets: bool = Field(
        default=False, description="Allow a target on a loopback, link-local, private or "
        "cluster address (the SSRF guard's exception).")


class SubscriptionDelivery(CrdModel):
    """The cortex's delivery state of the subscription, as its server reports it (never a
    secret, URL or payload; ADR 0130)."""

    lag: int | None = Field(default=None, ge=0,
                            description="Outbox events past the subscription's cursor.")
    last_success_time: str | None = Field(default=None, max_length=64,
                                          description="Last delivered event (RFC 3339).")
    last_failure_time: str | None = Field(default=None, max_length=64,
                                          description="Last failed attempt (RFC 3339).")
    last_error: str | None = Field(default=None, max_length=128,
                                   description="The last failure's class (HTTP 503, "
                                   "timed out, ...).")
    dead_letters: int | None = Field(default=None, ge=0,
                                     description="Events in the dead-letter queue.")
    behind_retention: bool | None = Field(default=None,
                                          description="The outbox dropped events it had "
                                          "not delivered.")


class CortexSubscriptionStatus(CommonStatus):
    """Observed state of a CortexSubscription."""

    secret_name: str | None = Field(default=None, max_length=253,
                                    description="The Secret the signing secret is read from.")
    delivery: SubscriptionDelivery | None = Field(
        default=None, description="Delivery state read from the cortex's servers.")
