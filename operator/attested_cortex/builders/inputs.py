"""The builders' inputs: custom resources parsed once into frozen values.

The controllers turn a watched body into these with :func:`parse_cortex` and friends; a
body that does not fit the CRD model (possible when the CRD in the cluster is older or
newer than this build) is an :class:`InvalidSpecError` with a message for a condition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from attested_cortex.crd import (
    AgentIdentitySpec,
    AgentIdentityStatus,
    HookChainSpec,
    HookChainStatus,
    MemoryCortexSpec,
    PermissionRuleSpec,
)
from attested_cortex.crd.cortexsubscription import (
    CortexSubscriptionSpec,
    CortexSubscriptionStatus,
)

SpecT = TypeVar("SpecT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)

#: Longest MemoryCortex name: its StatefulSet pod and revision labels must stay within 63.
MAX_CORTEX_NAME = 40


class InvalidSpecError(ValueError):
    """A custom resource that cannot be built from; the message names the field."""


@dataclass(frozen=True)
class Meta:
    """What the builders need of ``metadata``."""

    name: str
    namespace: str
    uid: str
    generation: int
    #: ``creationTimestamp`` (RFC 3339, so it sorts as text): who came first.
    created: str = ""


@dataclass(frozen=True)
class Resource(Generic[SpecT, StatusT]):
    """A custom resource: metadata, parsed spec and parsed status."""

    meta: Meta
    spec: SpecT
    status: StatusT


@dataclass(frozen=True)
class Defaults:
    """Operator-wide settings the builders fill in where a spec is silent."""

    server_image: str
    postgres_image: str
    #: Newest schema version this build's ``cortexctl migrate`` knows.
    schema_version: int
    #: ClusterRole that lets server pods create TokenReviews (installed by the chart).
    tokenreview_role: str = "attested-cortex-tokenreviewer"
    image_pull_policy: str = "IfNotPresent"


class NoStatus(BaseModel):
    """Stand-in status for inputs whose status the builders never read."""


Cortex = Resource[MemoryCortexSpec, NoStatus]
Identity = Resource[AgentIdentitySpec, AgentIdentityStatus]
Chain = Resource[HookChainSpec, HookChainStatus]
Rule = Resource[PermissionRuleSpec, NoStatus]
Subscription = Resource[CortexSubscriptionSpec, CortexSubscriptionStatus]


def parse_meta(body: Mapping[str, Any]) -> Meta:
    """``metadata`` of a watched object."""
    meta = body.get("metadata") or {}
    return Meta(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
                uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0),
                created=str(meta.get("creationTimestamp") or ""))


def _model(model: type[SpecT], data: object, where: str) -> SpecT:
    try:
        return model.model_validate(data or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err["loc"])
        raise InvalidSpecError(f"{where}.{path}: {err['msg']}" if path else
                               f"{where}: {err['msg']}") from exc


def parse_resource(body: Mapping[str, Any], spec: type[SpecT],
                   status: type[StatusT]) -> Resource[SpecT, StatusT]:
    """Any of our kinds from its body."""
    return Resource(meta=parse_meta(body), spec=_model(spec, body.get("spec"), "spec"),
                    status=_model(status, body.get("status"), "status"))


def parse_cortex(body: Mapping[str, Any]) -> Cortex:
    """A MemoryCortex; refuses names too long for the children's names and labels."""
    cortex = parse_resource(body, MemoryCortexSpec, NoStatus)
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", cortex.meta.name):
        raise InvalidSpecError("metadata.name: a MemoryCortex name names its Service, so it "
                               "must be a DNS-1035 label: lowercase letters, digits and '-', "
                               "starting with a letter")
    if len(cortex.meta.name) > MAX_CORTEX_NAME:
        raise InvalidSpecError(f"metadata.name: at most {MAX_CORTEX_NAME} characters, so the "
                               "database pod and its labels fit Kubernetes' limits")
    return cortex


def parse_identity(body: Mapping[str, Any]) -> Identity:
    """An AgentIdentity with its status (key revision, previous keys)."""
    return parse_resource(body, AgentIdentitySpec, AgentIdentityStatus)


def parse_chain(body: Mapping[str, Any]) -> Chain:
    """A HookChain with its status (the hooks last accepted)."""
    return parse_resource(body, HookChainSpec, HookChainStatus)


def parse_rule(body: Mapping[str, Any]) -> Rule:
    """A PermissionRule."""
    return parse_resource(body, PermissionRuleSpec, NoStatus)


def parse_subscription(body: Mapping[str, Any]) -> Subscription:
    """A CortexSubscription with its status."""
    return parse_resource(body, CortexSubscriptionSpec, CortexSubscriptionStatus)
