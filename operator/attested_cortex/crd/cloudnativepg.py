"""``spec.database.cloudNativePG``: a MemoryCortex whose database is a CloudNativePG Cluster.

The fields are the part of CloudNativePG's ``postgresql.cnpg.io/v1`` Cluster a cortex owner
decides (how many instances, how much disk, how many replicas confirm a commit, compute,
PostgreSQL parameters, the image); everything else of the Cluster is decided by the
operator's builder (``builders/clusters.py``). Read by ``memorycortex`` (the DatabaseSpec)
and by that builder. Pure data.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, JsonValue

from attested_cortex.crd.common import CrdModel, ResourceRequirements, StorageSpec, section

SyncMethod = Literal["any", "first"]
DataDurability = Literal["required", "preferred"]

#: PostgreSQL parameters the operator sets itself: shared_preload_libraries carries Apache
#: AGE, synchronous_standby_names is CloudNativePG's rendering of ``synchronous``.
OWNED_PARAMETERS: Final = ("shared_preload_libraries", "synchronous_standby_names")
MAX_PARAMETERS: Final = 64
MAX_PARAMETER_VALUE: Final = 256


def _owned_parameters_rule() -> dict[str, JsonValue]:
    owned = ", ".join(f"'{p}'" for p in OWNED_PARAMETERS)
    return {"rule": f"!self.exists(k, k in [{owned}])",
            "message": "shared_preload_libraries and synchronous_standby_names are set by the "
                       "operator (Apache AGE is preloaded; use synchronous for synchronous "
                       "replicas): remove them from parameters"}


class SynchronousSpec(CrdModel):
    """Synchronous replication: a commit is acknowledged once replicas have it too."""

    number: int = Field(
        ge=1, le=9,
        description="How many replicas must confirm every commit before the client is "
        "answered (CloudNativePG's spec.postgresql.synchronous.number); less than instances.",
    )
    method: SyncMethod = Field(
        default="any",
        description="any: any `number` of the replicas (quorum); first: the first `number` "
        "replicas in priority order.",
    )
    data_durability: DataDurability = Field(
        default="required",
        description="required: a commit waits while too few replicas are healthy (no "
        "acknowledged write is ever on one copy only); preferred: the required number "
        "shrinks to the healthy replicas, so writes go on when replicas are down.",
    )


class CloudNativePGDatabase(CrdModel):
    """A PostgreSQL cluster run by CloudNativePG (installed separately), owned by the cortex."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.synchronous) || self.synchronous.number < self.instances",
        "message": "synchronous.number must be less than instances: every synchronous "
                   "replica is one of the instances besides the primary",
    }]})

    instances: int = Field(
        default=3, ge=1, le=10,
        description="PostgreSQL instances: one primary and instances-1 streaming replicas "
        "that can take over when the primary fails.",
    )
    storage: StorageSpec = section(StorageSpec, "The data volume of each instance.")
    synchronous: SynchronousSpec | None = Field(
        default=None,
        description="Synchronous replication; absent: replicas follow asynchronously and a "
        "failover may lose the last acknowledged commits.",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of each PostgreSQL instance."
    )
    parameters: dict[str, str] | None = Field(
        default=None,
        description="PostgreSQL configuration parameters (postgresql.conf), passed to the "
        "Cluster as they are; CloudNativePG refuses the ones it manages. "
        "shared_preload_libraries and synchronous_standby_names are the operator's.",
        json_schema_extra={"maxProperties": MAX_PARAMETERS,
                           "additionalProperties": {"type": "string",
                                                    "maxLength": MAX_PARAMETER_VALUE},
                           "x-kubernetes-validations": [_owned_parameters_rule()]},
    )
    image_name: str | None = Field(
        default=None,
        description="PostgreSQL 17 + Apache AGE image of the instances (its tag must carry "
        "the major version, e.g. :17); the operator's postgres-age image when absent.",
        max_length=512,
    )
    pod_monitor: bool = Field(
        default=False,
        description="Ask CloudNativePG for a PodMonitor (needs the Prometheus operator's "
        "CRDs); off by default.",
    )
