"""AgentIdentity passes: a key generated once whose private half never leaves its Secret,
refusals (duplicate agent id, a lost or hand-edited key, a Secret another owner holds)
reported and never papered over, rotation when due, nothing written when idle."""

from __future__ import annotations

import base64
import json
from typing import Any

from attested_cortex.attest import keyfiles
from attested_cortex.builders import names as n
from attested_cortex.controller.agentidentity.keys import new_key_files
from tests.controller_fast.conftest import API, Operated, cortex, satellite

KIND = "AgentIdentity"


def identity(name: str, **spec: Any) -> dict[str, Any]:
    return satellite(KIND, name, "mem", **spec)


def key_secret(op: Operated, name: str) -> dict[str, Any]:
    secret = op.get("Secret", n.key_secret_name(name), "v1")
    assert secret is not None, f"no key Secret for {name}"
    return secret


def private_key(secret: dict[str, Any]) -> str:
    return base64.b64decode(secret["data"][keyfiles.PRIVATE_FILE]).decode()


async def test_a_key_is_generated_once_and_its_private_half_stays_in_the_secret(
        op: Operated) -> None:
    op.apply(cortex("mem"), identity("planner"))
    await op.reconcile(KIND, "planner")
    secret = key_secret(op, "planner")
    status = op.status(KIND, "planner")
    assert status["agentId"] == "k8s:ns/planner"
    assert (status["keyRevision"], status["secretName"]) == (1, n.key_secret_name("planner"))
    assert status["fingerprint"] == base64.b64decode(
        secret["data"][keyfiles.FINGERPRINT_FILE]).decode()
    assert op.reasons(KIND, "planner")["Ready"] == ("True", "KeyReady")
    secret_line = private_key(secret).splitlines()[1]  # a line of the key's base64 body
    said = json.dumps([status, op.cluster.list("v1", "Event", "ns")])
    assert "PRIVATE KEY" not in said and secret_line not in said

    writes = op.writes()
    for _ in range(3):
        await op.reconcile(KIND, "planner")
    assert op.writes() == writes
    assert key_secret(op, "planner")["data"] == secret["data"]


async def test_an_agent_id_held_by_an_earlier_identity_gets_no_key(op: Operated) -> None:
    op.apply(identity("first", agentId="planner"), identity("second", agentId="planner"))
    await op.reconcile(KIND, "first")
    await op.reconcile(KIND, "second")
    refused = op.condition(KIND, "second", "KeyReady")
    assert (refused["status"], refused["reason"]) == ("False", "DuplicateAgentId")
    assert "held by AgentIdentity first" in refused["message"]
    assert op.get("Secret", n.key_secret_name("second"), "v1") is None
    assert op.reasons(KIND, "first")["KeyReady"] == ("True", "KeyInSecret")


async def test_a_lost_key_is_reported_and_never_silently_replaced(op: Operated) -> None:
    op.apply(identity("planner"))
    await op.reconcile(KIND, "planner")
    op.cluster.delete("v1", "Secret", "ns", n.key_secret_name("planner"))
    await op.reconcile(KIND, "planner")
    assert op.reasons(KIND, "planner")["KeyReady"] == ("False", "KeyLost")
    assert op.get("Secret", n.key_secret_name("planner"), "v1") is None
    assert op.events(KIND, "planner")[-1] == ("Warning", "KeyLost")


async def test_a_hand_edited_key_is_refused_and_the_recorded_one_kept(op: Operated) -> None:
    op.apply(identity("planner"))
    await op.reconcile(KIND, "planner")
    recorded = op.status(KIND, "planner")["fingerprint"]
    files = new_key_files("k8s:ns/planner")
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": n.key_secret_name("planner")}, "data": {
        name: base64.b64encode(text.encode()).decode() for name, text in files.items()}})
    await op.reconcile(KIND, "planner")
    assert op.reasons(KIND, "planner")["KeyReady"] == ("False", "KeyMismatch")
    assert op.status(KIND, "planner")["fingerprint"] == recorded


async def test_a_key_secret_another_owner_controls_is_not_taken(op: Operated) -> None:
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": n.key_secret_name("planner"), "ownerReferences": [{
            "apiVersion": API, "kind": "MemoryCortex", "name": "other", "uid": "u-other",
            "controller": True}]}, "data": {}})
    op.apply(identity("planner"))
    await op.reconcile(KIND, "planner")
    assert op.reasons(KIND, "planner")["Ready"] == ("False", "NameCollision")
    assert key_secret(op, "planner")["data"] == {}


async def test_a_due_key_is_rotated_and_the_old_one_listed(op: Operated) -> None:
    op.apply(identity("researcher", rotationPolicy="Always", rotationSchedule="0 3 1 * *"))
    assert await op.reconcile(KIND, "researcher") is not None  # the next rotation
    first = op.status(KIND, "researcher")["fingerprint"]
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {  # generated long ago
        "name": n.key_secret_name("researcher"),
        "annotations": {n.KEY_CREATED_ANNOTATION: "2020-01-01T00:00:00Z"}}})
    await op.reconcile(KIND, "researcher")
    status = op.status(KIND, "researcher")
    assert status["keyRevision"] == 2 and status["fingerprint"] != first
    assert [(k["keyRevision"], k["fingerprint"]) for k in status["previousKeys"]] == [(1, first)]
    assert op.get("Secret", n.staged_key_secret_name("researcher"), "v1") is None
