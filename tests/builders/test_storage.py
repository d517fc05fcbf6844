"""Growing the database volume: the live claim template kept, the claim's verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from attested_cortex.builders import storage
from attested_cortex.builders.statefulsets import build_statefulset
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, cortex


def sized(size: str, storage_class: str | None = None) -> Any:
    managed: dict[str, Any] = {"storage": {"size": size}}
    if storage_class:
        managed["storage"]["storageClassName"] = storage_class
    return cortex({"database": {"managed": managed}})


def claim(requested: str, capacity: str | None = None, storage_class: str | None = "local",
          conditions: tuple[dict[str, str], ...] = ()) -> storage.Claim | None:
    pvc: dict[str, Any] = {"spec": {"resources": {"requests": {"storage": requested}},
                                    "storageClassName": storage_class},
                           "status": {"conditions": list(conditions)}}
    if capacity:
        pvc["status"]["capacity"] = {"storage": capacity}
    return storage.claim_of(pvc)


def test_the_live_template_is_applied_unchanged_whatever_the_spec_says() -> None:
    live = build_statefulset(sized("1Gi", "fast"), DEFAULTS)
    live["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"] = "Filesystem"  # defaulted
    live["spec"]["volumeClaimTemplates"][0]["status"] = {"phase": "Pending"}
    kept = storage.live_template(live)
    assert kept == {"metadata": {"name": "data", "labels": live["spec"]["volumeClaimTemplates"][0]
                                 ["metadata"]["labels"]},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "1Gi"}}}}
    again = build_statefulset(sized("5Gi", "slow"), DEFAULTS, live_claim_template=kept)
    assert again["spec"]["volumeClaimTemplates"] == [kept]
    assert storage.live_template(None) is None
    first = build_statefulset(sized("5Gi"), DEFAULTS)["spec"]["volumeClaimTemplates"][0]
    assert first["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert "storageClassName" not in first["spec"]


@pytest.mark.parametrize(("spec", "live", "grow_to", "status", "reason"), [
    (sized("1Gi"), None, None, "True", "AsRequested"),
    (sized("1Gi"), claim("1Gi", "10Gi"), None, "True", "AsRequested"),
    (sized("1Gi"), claim("1Gi"), None, "True", "AsRequested"),  # not bound yet
    (sized("1024Mi"), claim("1Gi", "1Gi"), None, "True", "AsRequested"),
    (sized("2Gi"), claim("1Gi", "1Gi"), "2Gi", "False", "Resizing"),
    (sized("2Gi"), claim("2Gi", "1Gi"), None, "False", "Resizing"),
    (sized("512Mi"), claim("1Gi", "1Gi"), None, "False", "ShrinkRefused"),
    (sized("2Gi", "fast"), claim("1Gi", "1Gi", "local"), None, "False", "StorageClassImmutable"),
    (sized("2Gi", "local"), claim("1Gi", "1Gi", "local"), "2Gi", "False", "Resizing"),
    (sized("2Gi"), claim("1e9", "1e9"), None, "False", "UnreadableSize"),
])
def test_plan(spec: Any, live: storage.Claim | None, grow_to: str | None, status: str,
              reason: str) -> None:
    planned = storage.plan(spec, live)
    assert planned.grow_to == grow_to
    assert (planned.condition.type, planned.condition.status, planned.condition.reason) == (
        "StorageReady", status, reason)


def test_resizing_names_the_claim_and_its_resize_conditions() -> None:
    live = claim("2Gi", "1Gi", conditions=({"type": "FileSystemResizePending", "status": "True",
                                           "message": "waiting for the pod to restart"},))
    message = storage.plan(sized("2Gi"), live).condition.message
    assert f"data-{CORTEX}-db-0" in message and "has 1Gi" in message
    assert "FileSystemResizePending: waiting for the pod to restart" in message


def test_the_resize_body_touches_only_the_request() -> None:
    assert storage.build_claim_resize(sized("3Gi"), "3Gi") == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"data-{CORTEX}-db-0", "namespace": NAMESPACE},
        "spec": {"resources": {"requests": {"storage": "3Gi"}}}}
    live = claim("1Gi", "1Gi")
    assert live is not None
    refused = storage.refused(sized("3Gi"), live, "3Gi", "no expansion")
    assert (refused.status, refused.reason) == ("False", "ResizeRefused")
    assert "stays at 1Gi" in refused.message and "no expansion" in refused.message
