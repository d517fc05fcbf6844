"""``helm upgrade`` from the previous release to this tree's chart on the real node
(docs/upgrade.md).

The previous release is PREVIOUS_COMMIT of hack/upgrade/previous.env: its chart and its cortex
image, built from git history by hack/upgrade/build-previous.sh (opt-in, cached by commit;
without it this module skips and says so). It is installed as a release of its own, in a
namespace of its own, with its own CRDs (the previous operator refuses fields it does not
know, so it cannot run against this tree's CRDs): the session release's CRDs are handed to it
for the module (Helm's ownership annotations) and handed back after, which is why this module
runs first in e2e/ (no other test has objects yet). A cortex with memories, a cortex-signed and
an agent-signed link, a transcript cited by a memory and its keys is made by the previous
operator, then ``helm upgrade`` to this chart: the CRDs are upgraded with the release, the
migration Job of the new schema runs once, the server rolls to the new image, and every
memory, link signature, transcript and key Secret is as it was; ``cortexctl audit verify
--deep`` is clean.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hack.support.waiting import wait_until

from attested_cortex.attest.keys import key_from_seed, seed_from_pem
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import sign
from attested_cortex.controller.versions import newest_schema_version
from attested_cortex.types import AgentId
from e2e.conftest import CHART, IMAGE_VALUES, RELEASE, ROOT, external, helm, kubectl, kubectl_json
from e2e.manifests import GROUP
from e2e.test_system import Agent, Forward, ok

BUILD = ROOT / "hack" / "upgrade" / "build-previous.sh"
UPGRADE_RELEASE = "ac-previous"
CORTEX = "up-memory"
PLANNER, RESEARCHER = "up-planner", "up-researcher"
CRDS = tuple(f"{p}.cortex.attested.dev" for p in
             ("memorycortexes", "hookchains", "permissionrules", "agentidentities",
              "cortexsubscriptions"))
WAIT = "240s"
NEWEST_SCHEMA = newest_schema_version()


def previous() -> tuple[Path, str]:
    """The previous release's directory and image reference, or a skip naming the script."""
    out = subprocess.run([str(BUILD), "--print-dir"], capture_output=True, text=True,
                         check=True, timeout=30).stdout.strip()
    directory = Path(out)
    if not (directory / "cortex.tar").is_file() or not (directory / "chart/Chart.yaml").is_file():
        pytest.skip(f"the previous release is not built: run {BUILD.relative_to(ROOT)} "
                    "(about 2 min, cached by commit)")
    return directory, (directory / "cortex.ref").read_text().strip()


def objects(namespace: str) -> list[dict[str, Any]]:
    meta = {"namespace": namespace}
    ref = {"cortexRef": {"name": CORTEX}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "name": PLANNER}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "name": RESEARCHER}},
        {"apiVersion": GROUP, "kind": "MemoryCortex", "metadata": {**meta, "name": CORTEX},
         "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}},
                  "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                  "permissions": {"mode": "Off"}, "transcripts": {"enabled": True}}},
        {"apiVersion": GROUP, "kind": "AgentIdentity", "metadata": {**meta, "name": PLANNER},
         "spec": {**ref, "keyCustody": "Cortex", "serviceAccountRef": {"name": PLANNER}}},
        {"apiVersion": GROUP, "kind": "AgentIdentity", "metadata": {**meta, "name": RESEARCHER},
         "spec": {**ref, "keyCustody": "Agent", "serviceAccountRef": {"name": RESEARCHER}}}]


def hand_crds(release: str, namespace: str) -> None:
    """Make ``release`` the Helm owner of our CRDs (adopted by its next install/upgrade)."""
    for crd in CRDS:
        ok(kubectl("annotate", "--overwrite", "crd", crd,
                   f"meta.helm.sh/release-name={release}",
                   f"meta.helm.sh/release-namespace={namespace}"))


def secrets(namespace: str) -> dict[str, tuple[str, str]]:
    """Every Secret of the namespace but Helm's: resourceVersion and a digest of its data."""
    items = kubectl_json("get", "secrets", "-n", namespace)["items"]
    return {s["metadata"]["name"]: (s["metadata"]["resourceVersion"], hashlib.sha256(
        json.dumps(s.get("data") or {}, sort_keys=True).encode()).hexdigest())
        for s in items if s.get("type") != "helm.sh/release.v1"}


def crd_has_spec_backup() -> bool:
    """Whether the MemoryCortex CRD served is this tree's (``spec.backup`` came after the
    previous release)."""
    crd = kubectl_json("get", "crd", CRDS[0])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return "backup" in spec["properties"]


def server_images(namespace: str) -> set[str]:
    pods = kubectl_json("get", "pods", "-n", namespace, "-l",
                        f"app.kubernetes.io/instance={CORTEX},app.kubernetes.io/component=server")
    return {c["image"] for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") == "Running" for c in p["spec"]["containers"]}


def deep_audit(namespace: str) -> subprocess.CompletedProcess[str]:
    return kubectl("exec", "-n", namespace, f"deployment/{CORTEX}-server", "-c", "server", "--",
                   "sh", "-c", 'exec cortexctl audit verify --deep '
                   '--database-url "$CORTEX_DATABASE_URL"')


@pytest.fixture(scope="module")
def upgraded_from(request: pytest.FixtureRequest,
                  namespace: str) -> Iterator[tuple[Path, str, str]]:
    """The previous release's image imported into the node; a namespace for it; the CRDs
    handed to it and back."""
    if external():
        pytest.skip("needs the session's real node (imports the previous image into it)")
    directory, image = previous()
    node = request.getfixturevalue("real_node").node
    imported = subprocess.run(
        ["ctr", "--address", str(node.layout.containerd_socket), "--namespace", "k8s.io",
         "images", "import", "--snapshotter", "overlayfs", str(directory / "cortex.tar")],
        capture_output=True, text=True, timeout=300, check=False)
    assert imported.returncode == 0, imported.stderr
    space = f"up-{uuid.uuid4().hex[:6]}"
    ok(kubectl("create", "namespace", space))
    kubectl("label", "namespace", space, "pod-security.kubernetes.io/enforce=restricted")
    hand_crds(UPGRADE_RELEASE, space)
    try:
        yield directory / "chart", image.rsplit(":", 1)[1], space
    finally:
        # The cortex first, while an operator still runs to finish it, then the release.
        kubectl("delete", "memorycortex,agentidentity", "--all", "-n", space, "--wait=true",
                "--timeout=120s")
        helm("uninstall", UPGRADE_RELEASE, "--namespace", space, "--wait", "--timeout", "2m")
        kubectl("delete", "namespace", space, "--wait=false")
        hand_crds(RELEASE, namespace)
        if not crd_has_spec_backup():  # the module stopped before the upgrade: ours again
            again = helm("upgrade", RELEASE, str(CHART), "--namespace", namespace, "--reuse-values",
                         *IMAGE_VALUES, "--wait", "--timeout", "3m")
            assert again.returncode == 0, again.stderr


def test_helm_upgrade_from_the_previous_release_keeps_everything(
        upgraded_from: tuple[Path, str, str]) -> None:
    chart, tag, space = upgraded_from
    values = [*IMAGE_VALUES[:2], "--set", f"image.tag={tag}", *IMAGE_VALUES[4:]]
    installed = helm("install", UPGRADE_RELEASE, str(chart), "--namespace", space, *values,
                     "--wait", "--timeout", "3m")
    assert installed.returncode == 0, installed.stderr
    assert not crd_has_spec_backup(), "the previous release's CRDs"
    ok(kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": objects(space)})))
    ok(kubectl("wait", "-n", space, "--for=condition=Ready", f"--timeout={WAIT}",
               f"memorycortex/{CORTEX}", f"agentidentity/{PLANNER}", f"agentidentity/{RESEARCHER}"))
    before_schema = kubectl_json("get", "mcx", CORTEX, "-n", space)["status"]["schemaVersion"]
    assert before_schema < NEWEST_SCHEMA, "the previous release must be at an older schema"
    assert server_images(space) == {f"attested-cortex/cortex:{tag}"}

    forward = Forward(space, CORTEX)
    forward.start()
    try:
        planner, researcher = Agent(forward, space, PLANNER), Agent(forward, space, RESEARCHER)
        made = write_everything(space, planner, researcher)
        keys = secrets(space)
        upgraded = helm("upgrade", UPGRADE_RELEASE, str(CHART), "--namespace", space,
                        *IMAGE_VALUES, "--wait", "--timeout", "3m")
        assert upgraded.returncode == 0, upgraded.stderr
        assert crd_has_spec_backup(), "helm upgrade upgraded the CRDs"
        wait_until(lambda: kubectl_json("get", "mcx", CORTEX, "-n", space)["status"].get(
            "schemaVersion") == NEWEST_SCHEMA, what="the new schema", seconds=240, interval_s=1)
        ok(kubectl("wait", "-n", space, "--for=condition=Ready", f"--timeout={WAIT}",
                   f"memorycortex/{CORTEX}"))
        wait_until(lambda: server_images(space) == {"attested-cortex/cortex:0.1.0"},
                   what="the server rolled to the new image", seconds=240, interval_s=1)
        job = kubectl_json("get", "job", f"{CORTEX}-migrate-v{NEWEST_SCHEMA}", "-n", space)
        assert job["status"].get("succeeded") == 1 and not job["status"].get("failed"), job
        pods = kubectl_json("get", "pods", "-n", space, "-l",
                            f"job-name={CORTEX}-migrate-v{NEWEST_SCHEMA}")["items"]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]  # it ran once
        forward.start()
        check_everything(planner, made)
        after = secrets(space)
        assert {n: after.get(n) for n in keys} == keys, "a Secret changed in the upgrade"
        audit = deep_audit(space)
        assert audit.returncode == 0, audit.stdout + audit.stderr
    finally:
        forward.stop()


def write_everything(space: str, planner: Agent, researcher: Agent) -> dict[str, Any]:
    """Memories, a cortex-signed and an agent-signed link, a transcript a memory cites."""
    memories = {planner.store("team/plans", f"plan {n} before the upgrade")["id"]: n
                for n in range(3)}
    status, transcript = planner.call("POST", "/v1/transcripts", {
        "namespace": "team/plans", "content": "user: what ships?\nagent: the cache layer.\n"})
    assert status == 201, transcript
    status, cited = planner.call("POST", "/v1/memories", {
        "namespace": "team/plans", "content": "the cache layer ships", "citations": [
            {"transcript_id": transcript["id"], "start": 0, "end": 17}]})
    assert status == 201, cited
    ids = list(memories)
    status, own = planner.call("POST", "/v1/links",
                               {"src_id": ids[0], "dst_id": ids[1], "relation": "related_to"})
    assert status == 201 and own["attest_level"] == "self_signed", own
    secret = kubectl_json("get", "secret", f"{RESEARCHER}-agent-key", "-n", space)["data"]
    agent_id = base64.b64decode(secret["agent-id"]).decode()
    key = key_from_seed(AgentId(agent_id),
                        seed_from_pem(base64.b64decode(secret["private.pem"]).decode()))
    valid_from = "2026-11-01T10:00:00Z"
    payload = link_payload(src_id=ids[1], dst_id=ids[2], relation="derived_from",
                           observed_by=agent_id, valid_from=datetime.fromisoformat(valid_from),
                           valid_until=None)
    status, peer = researcher.call("POST", "/v1/links", {
        "src_id": ids[1], "dst_id": ids[2], "relation": "derived_from", "valid_from": valid_from,
        "signature": base64.b64encode(sign(key, payload.encode())).decode()})
    assert status == 201 and peer["attest_level"] == "peer_attested", peer
    views = {i: planner.call("GET", f"/v1/memories/{i}")[1] for i in [*ids, cited["id"]]}
    links = {link["id"]: planner.call("GET", f"/v1/links/{link['id']}/verify")[1]
             for link in (own, peer)}
    assert all(v["signature_verified"] for v in links.values()), links
    replay = planner.call("GET", f"/v1/memories/{cited['id']}/replay")
    assert replay[0] == 200, replay
    return {"memories": views, "links": links, "replay": replay[1]}


def check_everything(planner: Agent, made: dict[str, Any]) -> None:
    """Every memory, link verification and replay answers as before the upgrade."""
    def answers() -> bool:
        return planner.call("GET", "/healthz")[0] == 200
    wait_until(answers, what="the new server answering", seconds=60, interval_s=0.5)
    for memory_id, view in made["memories"].items():
        status, now = planner.call("GET", f"/v1/memories/{memory_id}")
        assert status == 200, now
        assert {k: now.get(k) for k in ("content", "namespace", "created_at")} == \
            {k: view.get(k) for k in ("content", "namespace", "created_at")}
    for link_id, verified in made["links"].items():
        status, now = planner.call("GET", f"/v1/links/{link_id}/verify")
        assert status == 200 and now == verified, (now, verified)
    cited = next(i for i, v in made["memories"].items() if v["content"] == "the cache layer ships")
    status, replay = planner.call("GET", f"/v1/memories/{cited}/replay")
    assert status == 200 and replay == made["replay"], (replay, made["replay"])
