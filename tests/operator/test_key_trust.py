"""Which public keys a cortex trusts for an agent: one identity per agent id, and the key
status recorded, whatever happens to the key Secret by hand (issue 21, items 2 and 3)."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from hack.support.waiting import wait_until

from tests.operator.conftest import Object, Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube
EXTERNAL = {"external": {"secretRef": {"name": "no-such-secret", "key": "uri"}}}


def _keyrings(operated: Operated, cortex_name: str) -> dict[str, Object]:
    config = operated.get("configmap", f"{cortex_name}-config") or {}
    return {name: json.loads(text) for name, text in (config.get("data") or {}).items()
            if name.startswith("keyring-")}


def _trusted(operated: Operated, cortex_name: str, agent: str) -> list[str]:
    """Every public key the cortex's keyring files hold for ``agent``."""
    return sorted(key["public_key"] for ring in _keyrings(operated, cortex_name).values()
                  if ring["agent_id"] == agent for key in ring["keys"])


def test_a_second_identity_for_one_agent_id_is_refused(operated: Operated,
                                                       operator: OperatorProcess) -> None:
    operated.apply(cortex("dup", database=EXTERNAL),
                   satellite("AgentIdentity", "bob", "dup", agentId="bob"))
    operated.wait_condition("AgentIdentity", "bob", "Ready")
    operated.apply(satellite("AgentIdentity", "bob2", "dup", agentId="bob"))
    refused = operated.wait_condition("AgentIdentity", "bob2", "KeyReady", "False",
                                      reason="DuplicateAgentId")
    assert "AgentIdentity bob " in refused["message"]
    assert operated.condition("AgentIdentity", "bob2", "Ready")["status"] == "False"
    assert operated.get("secret", "bob2-agent-key") is None  # no key minted for it
    bob = operated.get("AgentIdentity", "bob")["status"]["publicKey"]
    # A third identity appears in the keyring: the render after the refusal.
    operated.apply(satellite("AgentIdentity", "eve", "dup"))
    wait_until(lambda: "keyring-eve.json" in _keyrings(operated, "dup"), what="eve's keyring",
               seconds=60, interval_s=0.2)
    assert _trusted(operated, "dup", "bob") == [bob]
    assert "keyring-bob2.json" not in _keyrings(operated, "dup")

    # The holder goes: the other identity holds the agent id from then on.
    operated.kubectl("delete", "aid/bob")
    operated.wait_condition("AgentIdentity", "bob2", "Ready")
    bob2 = operated.get("AgentIdentity", "bob2")["status"]["publicKey"]
    assert wait_until(lambda: _trusted(operated, "dup", "bob") == [bob2],
                      what="bob2's key alone trusted for bob", seconds=60, interval_s=0.2)


def _secret_files(operated: Operated, name: str) -> dict[str, str]:
    return dict(operated.get("secret", name)["data"])


def test_a_hand_edited_key_secret_is_reported_and_never_trusted(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("hand", database=EXTERNAL),
                   satellite("AgentIdentity", "alice", "hand"),
                   satellite("AgentIdentity", "carol", "hand"))
    for name in ("alice", "carol"):
        operated.wait_condition("AgentIdentity", name, "Ready")
    recorded = operated.get("AgentIdentity", "alice")["status"]
    original = _secret_files(operated, "alice-agent-key")
    carol = _secret_files(operated, "carol-agent-key")
    copied = {f: carol[f] for f in ("private.pem", "public.pem", "fingerprint")}
    operated.kubectl("patch", "secret/alice-agent-key", "--type=merge", "-p",
                     json.dumps({"data": copied}))

    mismatch = operated.wait_condition("AgentIdentity", "alice", "KeyReady", "False",
                                       reason="KeyMismatch")
    carol_fp = base64.b64decode(carol["fingerprint"]).decode()
    assert carol_fp in mismatch["message"] and recorded["fingerprint"] in mismatch["message"]
    status = operated.get("AgentIdentity", "alice")["status"]
    assert {k: status[k] for k in ("publicKey", "fingerprint", "keyRevision")} == {
        k: recorded[k] for k in ("publicKey", "fingerprint", "keyRevision")}
    assert status.get("previousKeys") is None
    events = json.loads(operated.kubectl(
        "get", "events", "--field-selector",
        "involvedObject.name=alice,involvedObject.kind=AgentIdentity", "-o", "json").stdout)
    assert any(e["type"] == "Warning" and e["reason"] == "KeyMismatch"
               for e in events["items"]), events["items"]
    assert "PRIVATE" not in json.dumps(events)
    # A render of the keyring after the edit still trusts only the recorded key.
    operated.apply(satellite("AgentIdentity", "dora", "hand"))
    wait_until(lambda: "keyring-dora.json" in _keyrings(operated, "hand"), what="dora's keyring",
               seconds=60, interval_s=0.2)
    assert _trusted(operated, "hand", recorded["agentId"]) == [recorded["publicKey"]]

    # Restoring the files ends the mismatch with the same key.
    operated.kubectl("patch", "secret/alice-agent-key", "--type=merge", "-p",
                     json.dumps({"data": {f: original[f] for f in copied}}))
    operated.wait_condition("AgentIdentity", "alice", "KeyReady", reason="KeyInSecret")
    assert operated.get("AgentIdentity", "alice")["status"]["fingerprint"] == \
        recorded["fingerprint"]


def test_a_second_identity_for_one_service_account_is_refused(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("sas", database=EXTERNAL),
                   satellite("AgentIdentity", "first", "sas",
                             serviceAccountRef={"name": "shared-sa"}))
    operated.wait_condition("AgentIdentity", "first", "Ready")
    operated.apply(satellite("AgentIdentity", "second", "sas",
                             serviceAccountRef={"name": "shared-sa"}))
    refused = operated.wait_condition("AgentIdentity", "second", "KeyReady", "False",
                                      reason="DuplicateServiceAccount")
    assert "AgentIdentity first " in refused["message"]
    operated.apply(satellite("AgentIdentity", "third", "sas"))
    wait_until(lambda: "keyring-third.json" in _keyrings(operated, "sas"), what="third's keyring",
               seconds=60, interval_s=0.2)
    config = yaml.safe_load(operated.get("configmap", "sas-config")["data"]["config.yaml"])
    mapped = [a["agent_id"] for a in config["agents"]
              if a["service_account"] == f"{operated.namespace}/shared-sa"]
    assert mapped == [f"k8s:{operated.namespace}/first"]


def test_a_key_secret_placed_by_hand_with_another_identitys_key_is_refused(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("copy", database=EXTERNAL),
                   satellite("AgentIdentity", "orig", "copy"))
    operated.wait_condition("AgentIdentity", "orig", "Ready")
    recorded = operated.get("AgentIdentity", "orig")["status"]
    operated.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "twin-agent-key"},
                    "data": _secret_files(operated, "orig-agent-key")})
    operated.apply(satellite("AgentIdentity", "twin", "copy"))
    refused = operated.wait_condition("AgentIdentity", "twin", "KeyReady", "False",
                                      reason="DuplicateKey")
    assert recorded["fingerprint"] in refused["message"] and "AgentIdentity orig" in \
        refused["message"]
    assert not (operated.get("AgentIdentity", "twin").get("status") or {}).get("fingerprint")
    operated.apply(satellite("AgentIdentity", "other", "copy"))
    wait_until(lambda: "keyring-other.json" in _keyrings(operated, "copy"), what="other's keyring",
               seconds=60, interval_s=0.2)
    assert "keyring-twin.json" not in _keyrings(operated, "copy")
