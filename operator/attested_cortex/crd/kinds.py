"""The kinds as data (names, scope, printer columns, models) and their CRD objects.

``KINDS`` is the one list of custom resources; ``build_crd(kind)`` turns an entry into an
``apiextensions.k8s.io/v1`` CustomResourceDefinition dict. Pure; called by ``rendering``
(``cortexctl crds``), by the drift test, and by the operator, whose tables of plurals, watched
kinds and satellites (controller/applying.py, controller/registry.py) are derived from
``KINDS`` rather than written again (the chart's RBAC reads the plurals from the generated
CRDs): adding a kind is an entry here, its model, its controller and one line in the
registry (docs/adr/0027-reconcilers-tested-in-memory-and-kinds-in-one-place.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from attested_cortex.crd.agentidentity import AgentIdentitySpec, AgentIdentityStatus
from attested_cortex.crd.common import GROUP, VERSION
from attested_cortex.crd.cortexsubscription import (
    CortexSubscriptionSpec,
    CortexSubscriptionStatus,
)
from attested_cortex.crd.hookchain import HookChainSpec, HookChainStatus
from attested_cortex.crd.memorycortex import MemoryCortexSpec, MemoryCortexStatus
from attested_cortex.crd.permissionrule import PermissionRuleSpec, PermissionRuleStatus
from attested_cortex.crd.structural import Schema, structural_schema

CATEGORIES: Final = ("cortex",)
READY = '.status.conditions[?(@.type=="Ready")]'


@dataclass(frozen=True)
class Column:
    """One ``kubectl get`` column."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class Kind:
    """A custom resource kind and everything its CRD is made of."""

    kind: str
    plural: str
    short_name: str
    description: str
    spec: type[BaseModel]
    status: type[BaseModel]
    columns: tuple[Column, ...]

    @property
    def crd_name(self) -> str:
        """The CRD's metadata.name: ``<plural>.<group>``."""
        return f"{self.plural}.{GROUP}"

    @property
    def api_version(self) -> str:
        """``<group>/<version>``, as objects of the kind carry it."""
        return f"{GROUP}/{VERSION}"

    @property
    def satellite(self) -> bool:
        """Whether the kind points at a cortex (``spec.cortexRef``): the operator indexes
        it by cortex and a change of it brings its cortex back."""
        return "cortex_ref" in self.spec.model_fields


def _common_columns(*key_columns: Column) -> tuple[Column, ...]:
    """Ready and Reason first, the kind's key fields, Age, then the Ready message (-o wide)."""
    return (
        Column("Ready", f"{READY}.status", description="Whether the object is ready."),
        Column("Reason", f"{READY}.reason", description="Why it is (not) ready."),
        *key_columns,
        Column("Age", ".metadata.creationTimestamp", type="date"),
        Column("Message", f"{READY}.message", description="Ready details.", priority=1),
    )


def _satellite_columns(*key_columns: Column) -> tuple[Column, ...]:
    """A satellite's columns: the cortex it belongs to (``spec.cortexRef``) first."""
    return _common_columns(Column("Cortex", ".spec.cortexRef.name"), *key_columns)


KINDS: Final[tuple[Kind, ...]] = (
    Kind(
        kind="MemoryCortex",
        plural="memorycortexes",
        short_name="mcx",
        description="A memory server for AI agents with its PostgreSQL+AGE database.",
        spec=MemoryCortexSpec,
        status=MemoryCortexStatus,
        columns=_common_columns(
            Column("Database", ".status.databaseMode",
                   description="Managed, External or CloudNativePG."),
            Column("Primary", ".status.primary",
                   description="The database pod that takes writes."),
            Column("Schema", ".status.schemaVersion", type="integer"),
            Column("Graph", ".status.kgBackend"),
            Column("Permissions", ".spec.permissions.mode"),
            Column("Endpoint", ".status.endpoint", priority=1),
        ),
    ),
    Kind(
        kind="HookChain",
        plural="hookchains",
        short_name="hc",
        description="Hooks that see, modify, deny or hold the operations of a MemoryCortex.",
        spec=HookChainSpec,
        status=HookChainStatus,
        columns=_satellite_columns(
            Column("Hooks", ".status.hookCount", type="integer",
                   description="Hooks accepted and in force (names in status.acceptedHooks)."),
        ),
    ),
    Kind(
        kind="PermissionRule",
        plural="permissionrules",
        short_name="prule",
        description="Who may do what in which memory namespaces of a MemoryCortex.",
        spec=PermissionRuleSpec,
        status=PermissionRuleStatus,
        columns=_satellite_columns(
            Column("Namespace", ".spec.namespace"),
            Column("Decision", ".spec.decision"),
            Column("Priority", ".spec.priority", type="integer"),
        ),
    ),
    Kind(
        kind="AgentIdentity",
        plural="agentidentities",
        short_name="aid",
        description="The Ed25519 signing identity of an agent writing to a MemoryCortex.",
        spec=AgentIdentitySpec,
        status=AgentIdentityStatus,
        columns=_satellite_columns(
            Column("Agent", ".status.agentId"),
            Column("Custody", ".spec.keyCustody"),
            Column("Revision", ".status.keyRevision", type="integer"),
            Column("Fingerprint", ".status.fingerprint", priority=1),
        ),
    ),
    Kind(
        kind="CortexSubscription",
        plural="cortexsubscriptions",
        short_name="csub",
        description="A webhook target receiving a MemoryCortex's events, signed.",
        spec=CortexSubscriptionSpec,
        status=CortexSubscriptionStatus,
        columns=_satellite_columns(
            Column("URL", ".spec.url", priority=1),
            Column("Enabled", ".spec.enabled", type="boolean"),
        ),
    ),
)


def open_api_schema(kind: Kind) -> Schema:
    """The whole object's schema: apiVersion, kind, metadata, spec (required), status."""
    properties: dict[str, Schema] = {
        "apiVersion": {"type": "string", "description": "API version of the object."},
        "kind": {"type": "string", "description": "Kind of the object."},
        "metadata": {"type": "object"},
        "spec": structural_schema(kind.spec),
        "status": structural_schema(kind.status),
    }
    return {
        "type": "object",
        "description": kind.description,
        "required": ["spec"],
        "properties": properties,
    }


def _column(column: Column) -> dict[str, Any]:
    out: dict[str, Any] = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    if column.description:
        out["description"] = column.description
    if column.priority:
        out["priority"] = column.priority
    return out


def build_crd(kind: Kind) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of ``kind``."""
    names = {
        "kind": kind.kind,
        "listKind": f"{kind.kind}List",
        "plural": kind.plural,
        "singular": kind.kind.lower(),
        "shortNames": [kind.short_name],
        "categories": list(CATEGORIES),
    }
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [_column(c) for c in kind.columns],
        "schema": {"openAPIV3Schema": open_api_schema(kind)},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.crd_name},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }
