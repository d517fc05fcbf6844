"""A link an agent signed before its key was rotated still verifies after the rotation:
the operator's rendered keyring, served by a real cortex server on real PostgreSQL."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hack.support.waiting import wait_until

from attested_cortex.attest.keyfiles import read_identity
from attested_cortex.attest.keys import AgentKey
from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite
from tests.server.test_attestation_api import client_signature
from tests.support.cortex import MakeCortex

pytestmark = pytest.mark.kube


def _agent_key(operated: Operated, secret_name: str, where: Path) -> AgentKey:
    secret = operated.get("secret", secret_name)
    where.mkdir(parents=True, exist_ok=True)
    for name, value in secret["data"].items():
        (where / name).write_bytes(base64.b64decode(value))
    return read_identity(where)


def _write_keyring(operated: Operated, cortex_name: str, keys: Path) -> int:
    data = operated.get("configmap", f"{cortex_name}-config")["data"]
    ring = keys / "keyring"
    ring.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, text in data.items():
        if name.startswith("keyring-"):
            tmp = ring / f".{name}"
            tmp.write_text(text)
            tmp.rename(ring / name)  # replaced whole, as a ConfigMap volume swaps it
            count += len(json.loads(text)["keys"])
    return count


async def test_link_signed_before_rotation_verifies_after_it(
        operated: Operated, operator: OperatorProcess, make_cortex: MakeCortex,
        migrated_pg15_dsn: str, tmp_path: Path) -> None:
    operated.apply(cortex("ring"), satellite("AgentIdentity", "signer2", "ring",
                                             keyCustody="Agent", rotationPolicy="Always",
                                             rotationSchedule="* * * * *"))
    operated.kubectl("wait", "--for=condition=Ready", "aid/signer2", "--timeout=90s")
    status = operated.get("AgentIdentity", "signer2")["status"]
    old_key = _agent_key(operated, status["secretName"], tmp_path / "old")
    keys = tmp_path / "keys"
    wait_until(lambda: _write_keyring(operated, "ring", keys) == 1, what="the key in the keyring",
               seconds=60, interval_s=0.2)
    server = await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                               graph_backend="CTE")
    agent = status["agentId"]
    ids = []
    for content in ("one", "two"):
        stored = await server.call("POST", "/v1/memories", {"namespace": "kb",
                                                            "content": content}, agent=agent)
        assert stored.status == 201, stored.text
        ids.append(stored.body["id"])
    a, b = ids
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    body = {"src_id": a, "dst_id": b, "relation": "supersedes", "valid_from": now}
    body["signature"] = client_signature(old_key, body)
    link = await server.call("POST", "/v1/links", body, agent=agent)
    assert link.status == 201 and link.body["attest_level"] == "peer_attested", link.text

    def rotated() -> bool:
        status = operated.get("AgentIdentity", "signer2")["status"]
        return status["keyRevision"] >= 2 and _write_keyring(operated, "ring", keys) >= 2

    wait_until(rotated, what="a rotation rendered into the keyring", seconds=150, interval_s=0.2)
    check = await server.call("GET", f"/v1/links/{link.body['id']}/verify")
    assert check.status == 200 and check.body["signature_verified"] is True, check.text
    new_key = _agent_key(operated, "signer2-agent-key", tmp_path / "new")
    assert new_key.public.public_key != old_key.public.public_key
