"""Building blocks shared by the custom resources: the base model, references,
Kubernetes quantities, resource requirements and the metav1.Condition status shape.

The per-kind modules (``memorycortex``, ``hookchain``, ``permissionrule``,
``agentidentity``) build their spec and status from these; the schema translator in
``structural`` turns them into structural OpenAPI. Pure data, no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

#: The API group and version of every kind.
GROUP: Final = "cortex.attested.dev"
VERSION: Final = "v1alpha1"

#: Kubernetes resource quantity ("10Gi", "500m", 2): the apimachinery pattern.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

#: A storage size: a positive quantity in bytes with an optional binary or decimal suffix.
STORAGE_SIZE_PATTERN: Final = r"^[1-9][0-9]*(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"

#: A DNS-1123 label: names of Kubernetes objects, containers and hooks.
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]


def section(model: type[BaseModel], description: str) -> Any:
    """A ``Field`` for an optional nested object that defaults to ``{}`` on the server.

    The API server applies nested defaults only inside objects that exist; defaulting the
    section itself to ``{}`` makes every default below it visible in stored objects.
    """
    return Field(default_factory=model, description=description, json_schema_extra={"default": {}})


class CrdModel(BaseModel):
    """Base of every CRD model: camelCase JSON names, unknown fields rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class LocalObjectReference(CrdModel):
    """A reference to an object by name in the same namespace."""

    name: str = Field(
        description="Name of the referenced object, in the same namespace.",
        min_length=1,
        max_length=253,
    )


class CortexReference(CrdModel):
    """The MemoryCortex this object belongs to."""

    name: str = Field(
        description="Name of the MemoryCortex, in the same namespace as this object.",
        min_length=1,
        max_length=253,
        pattern=DNS_LABEL_PATTERN,
    )


class SecretKeyReference(CrdModel):
    """A key inside a Secret in the same namespace."""

    name: str = Field(description="Name of the Secret.", min_length=1, max_length=253)
    key: str = Field(
        default="uri", description="Key inside the Secret.", min_length=1, max_length=253
    )


class ResourceRequirements(CrdModel):
    """Compute resources of a container, as in a Pod spec."""

    limits: dict[str, Quantity] | None = Field(
        default=None,
        description="Maximum resources (cpu, memory, ...) the container may use.",
        json_schema_extra={"maxProperties": 16},
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        description="Resources (cpu, memory, ...) reserved for the container.",
        json_schema_extra={"maxProperties": 16},
    )


class StorageSpec(CrdModel):
    """A database data volume (one per instance)."""

    size: str = Field(
        default="10Gi",
        description="Size of the data volume, a Kubernetes quantity such as 10Gi.",
        max_length=32,
        pattern=STORAGE_SIZE_PATTERN,
    )
    storage_class_name: str | None = Field(
        default=None,
        description="StorageClass of the data volume; the cluster default when absent.",
        max_length=253,
    )


class Condition(CrdModel):
    """One observation of the object's state, in the exact metav1.Condition shape."""

    type: str = Field(
        description="Type of the condition in CamelCase, e.g. Ready.",
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    status: Literal["True", "False", "Unknown"] = Field(
        description="Status of the condition: True, False or Unknown."
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The .metadata.generation the condition was set from.",
    )
    last_transition_time: datetime = Field(
        description="When the condition last changed from one status to another."
    )
    reason: str = Field(
        description="Machine-readable CamelCase reason for the last transition.",
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    )
    message: str = Field(
        description="Human-readable details about the last transition.", max_length=32768
    )


#: Conditions are a map keyed by type, as Kubernetes API conventions require.
CONDITIONS_EXTRA: Final[dict[str, Any]] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "maxItems": 16,
}


class CommonStatus(CrdModel):
    """Status fields every kind carries."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation the status describes."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Current state; the Ready condition summarises all the others.",
        json_schema_extra=CONDITIONS_EXTRA,
    )
