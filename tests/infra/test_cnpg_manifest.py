"""hack/cnpg.py: CloudNativePG's release manifest pointed at our images, and nothing else changed.

Literals shaped as releases/cnpg-1.27.1.yaml has them (the Deployment trimmed to what is
rewritten); the whole released file is exercised by the real-node e2e (tests/support/cnpg.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hack import cnpg

UPSTREAM = "upstream.example/cloudnative-pg/cloudnative-pg:1.27.1"  # what the release names
OURS = "docker.io/attested-cortex/cloudnative-pg:1.27.1"


def release() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cnpg-system"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "cnpg-controller-manager", "namespace": "cnpg-system"},
         "spec": {"template": {"spec": {"containers": [{
             "name": "manager", "image": UPSTREAM, "imagePullPolicy": "Always",
             "command": ["/manager"],
             "env": [{"name": "OPERATOR_IMAGE_NAME", "value": UPSTREAM},
                     {"name": "MONITORING_QUERIES_CONFIGMAP",
                      "value": "cnpg-default-monitoring"}]}]}}}},
    ]


def manager(documents: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_the_operator_and_its_pods_run_our_images_without_pulling() -> None:
    rewritten = cnpg.rewrite(release(), operator=OURS)
    container = manager(rewritten)
    assert container["image"] == OURS
    assert container["imagePullPolicy"] == "IfNotPresent"
    env = {e["name"]: e["value"] for e in container["env"]}
    # The bootstrap init container of every postgres pod copies the manager from this image.
    assert env["OPERATOR_IMAGE_NAME"] == OURS
    # A Cluster without imageName runs our database image, whose tag CNPG reads as major 17.
    assert env["POSTGRES_IMAGE_NAME"] == "docker.io/attested-cortex/postgres-age:17"
    assert env["MONITORING_QUERIES_CONFIGMAP"] == "cnpg-default-monitoring"
    # A standby's reconnect to a gone primary's IP fails after 1 s, not minutes (ADR 0111).
    assert env["STANDBY_TCP_USER_TIMEOUT"] == "1000"


def test_the_release_itself_is_left_as_it_was() -> None:
    original = release()
    kept = copy.deepcopy(original)
    rewritten = cnpg.rewrite(original, operator=OURS)
    assert original == kept
    assert rewritten[0] == kept[0]
    assert cnpg.rewrite(rewritten, operator=OURS) == rewritten  # twice is once


def test_a_release_shaped_otherwise_is_refused_not_half_rewritten() -> None:
    moved = release()
    moved[1]["metadata"]["name"] = "cnpg-operator"
    with pytest.raises(cnpg.ManifestShapeError, match="cnpg-controller-manager"):
        cnpg.rewrite(moved, operator=OURS)
    sidecar = release()
    sidecar[1]["spec"]["template"]["spec"]["containers"].append({"name": "proxy"})
    with pytest.raises(cnpg.ManifestShapeError, match="one container"):
        cnpg.rewrite(sidecar, operator=OURS)


def test_the_version_is_the_pinned_one() -> None:
    assert cnpg.version() == "1.27.1"
    assert cnpg.operator_image(cnpg.version()) == OURS
