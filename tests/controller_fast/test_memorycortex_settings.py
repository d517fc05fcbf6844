"""Server settings from the custom resources: the audit signer's key Secret made once and
mounted, the embedding endpoint's key waited for, an identity's quota rolling the server."""

from __future__ import annotations

import base64
import json

import yaml

from attested_cortex.builders import names as n
from tests.controller_fast.conftest import (
    Operated,
    cortex,
    database_runs,
    job_finished,
    satellite,
    server_rolled,
)

KIND = "MemoryCortex"
SIGNER = n.audit_signer_secret_name("mem")


async def roll(op: Operated) -> None:
    """Passes until the cortex is Ready, Kubernetes' controllers doing their part."""
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    await op.reconcile(KIND, "mem")


def config(op: Operated) -> dict[str, object]:
    data = (op.get("ConfigMap", n.config_name("mem"), "v1") or {})["data"]["config.yaml"]
    loaded: dict[str, object] = yaml.safe_load(data)
    return loaded


def pod_spec(op: Operated) -> dict[str, list[dict[str, object]]]:
    deployment = op.get("Deployment", n.server_name("mem"), "apps/v1") or {}
    spec: dict[str, list[dict[str, object]]] = deployment["spec"]["template"]["spec"]
    return spec


def config_hash(op: Operated) -> str:
    deployment = op.get("Deployment", n.server_name("mem"), "apps/v1") or {}
    return str(deployment["spec"]["template"]["metadata"]["annotations"][
        n.CONFIG_HASH_ANNOTATION])


async def test_the_audit_signer_key_is_made_once_and_mounted(op: Operated) -> None:
    op.apply(cortex("mem"))
    await roll(op)
    first = op.get("Secret", SIGNER, "v1") or {}
    agent = base64.b64decode(first["data"]["agent-id"]).decode()
    assert agent == "cortex:ns/mem" == config(op)["audit_signer"]
    assert "private.pem" in first["data"]
    volumes = {str(v["name"]): v for v in pod_spec(op)["volumes"]}
    assert volumes["audit-signer"]["secret"]["secretName"] == SIGNER  # type: ignore[index]
    for _ in range(3):  # re-reconciles (and an operator restart: same code path) keep the key
        await op.reconcile(KIND, "mem")
    again = op.get("Secret", SIGNER, "v1") or {}
    assert again["data"] == first["data"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    private = first["data"]["private.pem"]
    said = json.dumps([op.status(KIND, "mem"), op.cluster.events(KIND, "mem", "ns")])
    assert private not in said and base64.b64decode(private).decode() not in said


async def test_a_cortex_without_a_signer_gets_no_key(op: Operated) -> None:
    op.apply(cortex("mem", audit={"signer": {"mode": "Off"}}))
    await roll(op)
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")
    assert op.get("Secret", SIGNER, "v1") is None
    assert "audit_signer" not in config(op)
    assert "audit-signer" not in {v["name"] for v in pod_spec(op)["volumes"]}


async def test_reads_and_witnesses_reach_the_server_settings(op: Operated) -> None:
    op.apply(cortex("mem"))
    await roll(op)
    assert config(op)["audit"] == {"record_reads": True}
    before = config_hash(op)
    op.apply(cortex("mem", audit={"recordReads": False}))
    await op.reconcile(KIND, "mem")
    assert config(op)["audit"] == {"record_reads": False}
    assert config_hash(op) != before  # the server rolls with it
    witness = {"name": "witness.example/w1", "url": "https://witness.example"}
    op.apply(cortex("mem", audit={"witnesses": [witness]}))
    await op.reconcile(KIND, "mem")
    assert config(op)["audit"] == {"record_reads": True, "witnesses": [witness]}


async def test_the_embedding_key_secret_is_waited_for_not_copied(op: Operated) -> None:
    op.apply(cortex("mem", embedding={"mode": "Endpoint", "url": "https://embed.example/v1",
                                      "apiKeySecretRef": {"name": "embed-key"}}))
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    assert op.get("Deployment", n.server_name("mem"), "apps/v1") is None  # not rolled yet
    held = op.condition(KIND, "mem", "ServerReady")
    assert (held["status"], held["reason"]) == ("False", "SecretMissing")
    assert "Secret embed-key (volume embedding-key)" in held["message"]
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "embed-key"},
              "data": {"apiKey": base64.b64encode(b"sk-not-in-config").decode()}})
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")
    assert config(op)["embedder"] == "https://embed.example/v1"
    cm = json.dumps(op.get("ConfigMap", n.config_name("mem"), "v1"))
    assert "sk-not-in-config" not in cm and "c2stbm90LWluLWNvbmZpZw" not in cm


async def test_an_identity_quota_rolls_the_server(op: Operated) -> None:
    op.apply(cortex("mem"), satellite("AgentIdentity", "bot", "mem"))
    await op.reconcile("AgentIdentity", "bot")  # its key: only keyed identities are served
    await roll(op)
    before = config_hash(op)
    op.apply(satellite("AgentIdentity", "bot", "mem", quotas={"requestsPerSecond": 7}))
    await op.reconcile("AgentIdentity", "bot")
    await op.reconcile(KIND, "mem")
    assert config(op)["quotas"]["per_agent"] == [  # type: ignore[index]
        {"agent_id": "k8s:ns/bot", "requests_per_second": 7}]
    assert config_hash(op) != before
