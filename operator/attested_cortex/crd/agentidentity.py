"""AgentIdentity: an agent's Ed25519 signing identity, as spec and status models.

``agentId`` and ``keyCustody`` are immutable (CEL transition rules). The private key lives
only in the Secret named in ``status.secretName`` (or only in the agent's workload for
``keyCustody: Agent``) and never in status. Read by the renderer (``kinds``) and, later,
by the operator's key manager.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, JsonValue, StringConstraints

from attested_cortex.crd.common import (
    STORAGE_SIZE_PATTERN,
    CommonStatus,
    CortexReference,
    CrdModel,
    LocalObjectReference,
)

KeyCustody = Literal["Cortex", "Agent"]
RotationPolicy = Literal["Never", "Always"]
LabelValue = Annotated[str, StringConstraints(max_length=63)]
AnnotationValue = Annotated[str, StringConstraints(max_length=4096)]
ScopeText = Annotated[str, StringConstraints(
    min_length=1, max_length=600,
    pattern=r"^(memory\.(read|write|forget|override)|graph\.(read|write)|audit\.read"
    r"|approvals\.decide)(:[A-Za-z0-9._*/@:-]+)?$")]

#: Agent ids: printable, no spaces; the default form is ``k8s:<namespace>/<name>``.
AGENT_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$"

SPEC_RULES: Final[list[JsonValue]] = [
    {
        "rule": "has(self.agentId) == has(oldSelf.agentId)",
        "message": "agentId is immutable",
    },
    {
        "rule": "self.rotationPolicy != 'Always' || has(self.rotationSchedule)",
        "message": "rotationPolicy Always needs rotationSchedule",
    },
]
IMMUTABLE: Final = "self == oldSelf"


class SecretTemplate(CrdModel):
    """Labels and annotations copied onto the key Secret."""

    labels: dict[str, LabelValue] | None = Field(
        default=None, description="Labels of the Secret.", json_schema_extra={"maxProperties": 64}
    )
    annotations: dict[str, AnnotationValue] | None = Field(
        default=None,
        description="Annotations of the Secret.",
        json_schema_extra={"maxProperties": 64},
    )


class AgentQuotas(CrdModel):
    """This agent's own limits, in place of the cortex's spec.quotas."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.requestsPerSecond) || has(self.storage)",
        "message": "quotas needs requestsPerSecond or storage; remove quotas to use the "
                   "cortex's defaults",
    }]})

    requests_per_second: int | None = Field(
        default=None, ge=1, le=100000,
        description="Requests per second this agent may make (1 to 100000); the cortex's "
        "quotas.requestsPerSecond when absent.",
    )
    storage: str | None = Field(
        default=None, max_length=32, pattern=STORAGE_SIZE_PATTERN,
        description="Memory content this agent may store, a quantity such as 1Gi; the "
        "cortex's quotas.storagePerAgent when absent.",
    )


class AgentIdentitySpec(CrdModel):
    """Desired state of an AgentIdentity."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": SPEC_RULES})

    cortex_ref: CortexReference = Field(description="The MemoryCortex the agent writes to.")
    agent_id: str | None = Field(
        default=None,
        description="The agent id signatures name; k8s:<namespace>/<name> when absent. Immutable. "
        "Ids starting with cortex: are the cortex's own (its audit signer, its sweepers).",
        max_length=253,
        pattern=AGENT_ID_PATTERN,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": IMMUTABLE, "message": "agentId is immutable"},
                {"rule": "!self.startsWith('cortex:')",
                 "message": "agentId may not start with cortex: (reserved for the cortex's own "
                            "audit signer and sweepers, which an agent must not sign as)"},
            ]
        },
    )
    key_custody: KeyCustody = Field(
        default="Cortex",
        description="Cortex: the cortex signs for the authenticated agent; Agent: only the "
        "agent's workload holds the private key. Immutable.",
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": IMMUTABLE, "message": "keyCustody is immutable"}]
        },
    )
    service_account_ref: LocalObjectReference | None = Field(
        default=None,
        description="ServiceAccount whose tokens authenticate as this agent.",
    )
    scopes: list[ScopeText] | None = Field(
        default=None,
        description="What the agent may do, e.g. memory.read:team/** or graph.write "
        "(memory.read, memory.write, memory.forget, memory.override, graph.read, graph.write, "
        "audit.read, approvals.decide; ':' and a namespace pattern narrows one). Every scope "
        "but memory.override when absent. Applies to requests authenticated through "
        "serviceAccountRef.",
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    trust_tier: Literal["Trusted", "SemiTrusted", "Untrusted"] | None = Field(
        default=None,
        description="The agent's trust tier: its scopes are capped by the tier's ceiling "
        "(MemoryCortex spec.trust; docs/adr/0049). The cortex's spec.trust.defaultTier when "
        "absent. Kernel is the server's own and cannot be given to an agent. Applies to "
        "requests authenticated through serviceAccountRef.",
    )
    rotation_policy: RotationPolicy = Field(
        default="Never",
        description="Never keeps the key; Always replaces it on rotationSchedule.",
    )
    rotation_schedule: str | None = Field(
        default=None,
        description="Cron schedule of key rotation (e.g. '0 3 1 * *') when rotationPolicy is "
        "Always.",
        min_length=9,
        max_length=128,
    )
    revision_history_limit: int = Field(
        default=3, ge=0, le=100, description="Retired public keys kept in status.previousKeys."
    )
    secret_template: SecretTemplate | None = Field(
        default=None, description="Labels and annotations of the key Secret."
    )
    quotas: AgentQuotas | None = Field(
        default=None,
        description="Per-agent overrides of the cortex's spec.quotas, in force once the "
        "identity has a key (a change restarts the cortex's server pods, which read quotas "
        "at start).",
    )


class PreviousKey(CrdModel):
    """A retired public key, kept so old signatures still verify."""

    key_revision: int = Field(ge=1, description="Revision of the retired key.")
    public_key: str = Field(description="Base64 Ed25519 public key.", max_length=64)
    fingerprint: str = Field(description="Fingerprint of the public key.", max_length=128)
    retired_at: datetime | None = Field(default=None, description="When the key was replaced.")


class AgentIdentityStatus(CommonStatus):
    """Observed state of an AgentIdentity; never holds private material."""

    agent_id: str | None = Field(
        default=None, description="The effective agent id.", max_length=253
    )
    public_key: str | None = Field(
        default=None,
        description="Base64 Ed25519 public key of the current revision.",
        max_length=64,
    )
    fingerprint: str | None = Field(
        default=None, description="Fingerprint of the current public key.", max_length=128
    )
    key_revision: int | None = Field(
        default=None, ge=0, description="Revision of the current key, 1 for the first."
    )
    secret_name: str | None = Field(
        default=None, description="Secret holding the current key pair.", max_length=253
    )
    previous_keys: list[PreviousKey] | None = Field(
        default=None, description="Retired public keys, newest first.", max_length=100
    )
