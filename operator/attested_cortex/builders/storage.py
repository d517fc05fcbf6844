"""Growing the managed database's data volume after a change of ``storage.size``. Pure.

A StatefulSet's ``volumeClaimTemplates`` cannot change once it exists (the API server
refuses the whole update, so the image, resources and everything else would be stuck too).
The operator therefore keeps the live template in every apply (:func:`live_template`) and
grows the one claim itself, as CloudNativePG does: the claim's ``requests.storage`` is
raised (the StorageClass must allow expansion) and ``StorageReady`` says how far it got.
A smaller size or another StorageClass cannot apply to a live claim and is reported, never
attempted. Called by controller/memorycortex/database.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attested_cortex.builders import names
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.quantities import quantity_bytes

Object = dict[str, Any]
TYPE = "StorageReady"


@dataclass(frozen=True)
class Claim:
    """What the live claim asks for and has."""

    requested: str
    capacity: str | None
    storage_class_name: str | None
    resizing: str  # the claim's resize conditions, "" when none


def claim_name(cortex: Cortex) -> str:
    """The StatefulSet controller's name for the database pod's claim."""
    return f"data-{names.db_name(cortex.meta.name)}-0"


def live_template(statefulset: Object | None) -> Object | None:
    """The claim template of the live StatefulSet, in the shape the builder emits."""
    templates = ((statefulset or {}).get("spec") or {}).get("volumeClaimTemplates") or []
    if not templates:
        return None
    spec = templates[0].get("spec") or {}
    kept: Object = {"accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                    "resources": {"requests": {
                        "storage": spec["resources"]["requests"]["storage"]}}}
    if spec.get("storageClassName"):
        kept["storageClassName"] = spec["storageClassName"]
    return {"metadata": {"name": templates[0]["metadata"]["name"],
                         "labels": templates[0]["metadata"].get("labels") or {}},
            "spec": kept}


def claim_of(pvc: Object | None) -> Claim | None:
    """The facts of a live PersistentVolumeClaim (None when it does not exist yet)."""
    if pvc is None:
        return None
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    resizing = "; ".join(f"{c.get('type')}: {c.get('message') or c.get('reason') or ''}"
                         for c in status.get("conditions") or []
                         if c.get("status") == "True")
    return Claim(requested=spec["resources"]["requests"]["storage"],
                 capacity=(status.get("capacity") or {}).get("storage"),
                 storage_class_name=spec.get("storageClassName"), resizing=resizing)


@dataclass(frozen=True)
class StoragePlan:
    """The size to request on the claim (None: nothing to write) and the condition."""

    grow_to: str | None
    condition: Observation


def plan(cortex: Cortex, claim: Claim | None) -> StoragePlan:
    """Compare the spec with the live claim."""
    managed = cortex.spec.database.managed
    assert managed is not None
    want = managed.storage.size
    if claim is None:
        return StoragePlan(None, Observation.of(
            TYPE, True, "AsRequested", f"the data volume is created with {want}"))
    name = claim_name(cortex)
    wanted_class = managed.storage.storage_class_name
    if wanted_class and wanted_class != claim.storage_class_name:
        return StoragePlan(None, Observation.of(
            TYPE, False, "StorageClassImmutable",
            f"claim {name} uses StorageClass {claim.storage_class_name!r}; a live claim "
            f"cannot move to {wanted_class!r} (restore the spec, or migrate the data)"))
    try:
        wanted, requested = quantity_bytes(want), quantity_bytes(claim.requested)
        capacity = quantity_bytes(claim.capacity) if claim.capacity else None
    except ValueError as exc:  # a quantity form the API accepts but we do not read
        return StoragePlan(None, Observation.of(TYPE, False, "UnreadableSize", str(exc)))
    if wanted < requested:
        return StoragePlan(None, Observation.of(
            TYPE, False, "ShrinkRefused",
            f"claim {name} requests {claim.requested}; a volume cannot shrink to {want}"))
    if wanted > requested:
        return StoragePlan(want, Observation.of(
            TYPE, False, "Resizing", f"claim {name} is growing from {claim.requested} to {want}"))
    if capacity is None:
        return StoragePlan(None, Observation.of(
            TYPE, True, "AsRequested", f"claim {name} requests {want} (not bound yet)"))
    if capacity < wanted:
        detail = f" ({claim.resizing})" if claim.resizing else ""
        return StoragePlan(None, Observation.of(
            TYPE, False, "Resizing",
            f"claim {name} requests {want}, has {claim.capacity}{detail}"))
    return StoragePlan(None, Observation.of(
        TYPE, True, "AsRequested", f"claim {name} has {claim.capacity} (asked {want})"))


def refused(cortex: Cortex, claim: Claim, want: str, why: str) -> Observation:
    """The condition when the API server (or the StorageClass) refuses the growth."""
    return Observation.of(
        TYPE, False, "ResizeRefused",
        f"claim {claim_name(cortex)} stays at {claim.requested}; growing it to {want} was "
        f"refused: {why}"[:1024])


def build_claim_resize(cortex: Cortex, size: str) -> Object:
    """The server-side apply body that raises the claim's request to ``size``."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name(cortex), "namespace": cortex.meta.namespace},
            "spec": {"resources": {"requests": {"storage": size}}}}
