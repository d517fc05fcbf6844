"""AgentIdentity: a key pair created once and never regenerated, public half in status,
custody decides what the cortex server mounts, rotation keeps old keys verifiable."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from hack.support.waiting import wait_until

from attested_cortex.attest.keyring import parse_keyring_file
from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube


def _data(secret: dict) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_key_created_once_public_half_in_status(operated: Operated,
                                                 operator: OperatorProcess) -> None:
    operated.apply(cortex("keys"), satellite("AgentIdentity", "planner", "keys",
                                             secretTemplate={"labels": {"team": "a"}}))
    operated.kubectl("wait", "--for=condition=Ready", "aid/planner", "--timeout=90s")
    status = operated.get("AgentIdentity", "planner")["status"]
    secret = operated.get("secret", status["secretName"])
    files = _data(secret)
    assert files["agent-id"] == f"k8s:{operated.namespace}/planner" == status["agentId"]
    assert "PRIVATE KEY" in files["private.pem"] and files["fingerprint"] == status["fingerprint"]
    assert status["keyRevision"] == 1 and len(base64.b64decode(status["publicKey"])) == 32
    assert secret["metadata"]["labels"]["team"] == "a"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "AgentIdentity"
    whole = json.dumps(operated.get("AgentIdentity", "planner"))
    assert "PRIVATE" not in whole and files["private.pem"].splitlines()[1] not in whole
    # a spec change, a second operator start: the key stays
    operated.kubectl("patch", "aid/planner", "--type=merge", "-p", json.dumps(
        {"spec": {"revisionHistoryLimit": 5, "secretTemplate": {"labels": {"team": "b"}}}}))
    relabelled = wait_until(lambda: (
        s := operated.get("secret", status["secretName"]))["metadata"]["labels"].get(
            "team") == "b" and s, what="the template's new label", seconds=60, interval_s=0.2)
    assert relabelled["data"] == secret["data"]
    assert files["private.pem"].splitlines()[1] not in operator.output()


def test_custody_decides_what_the_server_mounts(operated: Operated,
                                                operator: OperatorProcess) -> None:
    operated.apply(cortex("custody"),
                   satellite("AgentIdentity", "signer", "custody", keyCustody="Cortex"),
                   satellite("AgentIdentity", "holder", "custody", keyCustody="Agent",
                             serviceAccountRef={"name": "holder-sa"}))
    for name in ("signer", "holder"):
        operated.kubectl("wait", "--for=condition=Ready", f"aid/{name}", "--timeout=90s")
    operated.kubectl("wait", "--for=condition=Ready", "mcx/custody", "--timeout=120s")

    def mounted() -> list[str] | None:
        deploy = operated.get("deployment", "custody-server")
        if not deploy:
            return None
        volumes = deploy["spec"]["template"]["spec"]["volumes"]
        secrets = [v["secret"]["secretName"] for v in volumes if "secret" in v]
        return secrets if "signer-agent-key" in secrets else None

    secrets = wait_until(mounted, what="the signer's key mounted", seconds=60, interval_s=0.2)
    assert "holder-agent-key" not in secrets
    config = operated.get("configmap", "custody-config")["data"]
    holder = operated.get("AgentIdentity", "holder")["status"]
    ring = parse_keyring_file(json.loads(config["keyring-holder.json"]))
    assert [base64.b64encode(r.public_key).decode() for r in ring] == [holder["publicKey"]]
    agents = yaml.safe_load(config["config.yaml"])["agents"]
    assert {"service_account": f"{operated.namespace}/holder-sa",
            "agent_id": holder["agentId"]} in agents
    status = operated.get("MemoryCortex", "custody")["status"]
    assert status["identities"] == 2


def test_rotation_keeps_the_old_key_verifiable(operated: Operated,
                                               operator: OperatorProcess) -> None:
    operated.apply(cortex("rot"), satellite("AgentIdentity", "rotor", "rot",
                                            rotationPolicy="Always",
                                            rotationSchedule="* * * * *"))
    operated.kubectl("wait", "--for=condition=Ready", "aid/rotor", "--timeout=90s")
    first = operated.get("AgentIdentity", "rotor")["status"]

    def rotated() -> dict | None:
        status = (operated.get("AgentIdentity", "rotor") or {}).get("status") or {}
        # past the revision first read: on a loaded machine the schedule can fire before
        # the Ready wait returns, and first is then already a rotated key
        return status if (status.get("keyRevision") or 0) > first["keyRevision"] else None

    second = wait_until(rotated, what="a rotation", seconds=150, interval_s=0.2)
    assert second["publicKey"] != first["publicKey"]
    assert second["previousKeys"][0]["publicKey"] == first["publicKey"]
    assert second["previousKeys"][0]["keyRevision"] == first["keyRevision"]
    assert operated.get("secret", "rotor-agent-key-next") is None

    def keyring() -> list | None:
        config = operated.get("configmap", "rot-config")["data"]
        ring = parse_keyring_file(json.loads(config["keyring-rotor.json"]))
        return ring if len(ring) >= 2 else None

    ring = sorted(wait_until(keyring, what="both keys in the keyring", seconds=60,
                             interval_s=0.2), key=lambda r: r.revision)
    assert ring[0].valid_until is not None and ring[0].valid_until == ring[1].valid_from
    assert base64.b64encode(ring[0].public_key).decode() == first["publicKey"]
