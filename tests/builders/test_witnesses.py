"""The objects of an operator-run witness (spec.audit.witnesses[].run, ADR 0102), from
literal specs: restricted pods, the cortex's controller reference on each, the witness's
ServiceAccount mapped to audit.read alone, only external witnesses in the server's config."""

from __future__ import annotations

import json
from typing import Any

from nacl.signing import SigningKey

from attested_cortex.builders import witnesses as w
from attested_cortex.builders.configmaps import Satellites, server_settings
from tests.builders.specs import (
    CORTEX,
    DEFAULTS,
    NAMESPACE,
    assert_restricted,
    container,
    cortex,
)

BASE = f"{CORTEX}-witness-w1"
RUN = {"name": "w1", "run": {"intervalSeconds": 12, "size": "32Mi",
                             "storageClassName": "local"}}
EXTERNAL = {"name": "witness.example/one", "url": "https://witness.example"}


def witnessed(*items: dict[str, Any], **spec: Any) -> Any:
    return cortex({"audit": {"witnesses": list(items)}, **spec})


def _owned(obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    assert meta["namespace"] == NAMESPACE
    assert meta["labels"]["app.kubernetes.io/component"] == "witness"
    assert meta["labels"][w.WITNESS_LABEL] == "w1"
    assert [(r["kind"], r["name"], r["controller"]) for r in meta["ownerReferences"]] == [
        ("MemoryCortex", CORTEX, True)]


def test_the_deployment_is_one_restricted_pod_on_its_own_volume_and_key() -> None:
    c = witnessed(RUN)
    [(spec, run)] = w.operator_run(c)
    deployment = w.build_deployment(c, "w1", run, DEFAULTS)
    _owned(deployment)
    assert deployment["metadata"]["name"] == BASE
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one writer of its state
    template = deployment["spec"]["template"]
    assert_restricted(template)
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    assert template["spec"]["serviceAccountName"] == BASE
    box = container(template, "witness")
    assert box["image"] == DEFAULTS.server_image
    assert box["args"] == [
        "audit", "witness", "--server", f"http://{CORTEX}.{NAMESPACE}.svc:8080",
        "--state", w.STATE_DIR, "--key-file", f"{w.KEY_DIR}/{w.KEY_FILE}", "--every", "12",
        "--token-file", w.TOKEN_FILE, "--report-listen", f"0.0.0.0:{w.REPORT_PORT}"]
    assert box["ports"] == [{"name": "report", "containerPort": w.REPORT_PORT,
                             "protocol": "TCP"}]
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"] == {"claimName": f"{BASE}-state"}
    assert volumes["key"]["secret"] == {"secretName": f"{BASE}-key", "defaultMode": 0o400}
    assert spec.name == "w1"


def test_a_tls_cortex_is_verified_with_its_ca_only() -> None:
    c = witnessed(RUN, server={"tls": {"certManager": {"issuerRef": {"name": "ca"}}}})
    [(_, run)] = w.operator_run(c)
    template = w.build_deployment(c, "w1", run, DEFAULTS)["spec"]["template"]
    args = container(template, "witness")["args"]
    assert args[args.index("--server") + 1].startswith("https://")
    assert args[-2:] == ["--ca-file", "/var/run/cortex/tls-ca/ca.crt"]
    secrets = [v["secret"] for v in template["spec"]["volumes"] if "secret" in v]
    assert all(item["key"] != "tls.key" for s in secrets for item in s.get("items", []))


def test_the_key_secret_claim_and_service_account() -> None:
    c = witnessed(RUN)
    seed = bytes(range(32))
    secret = w.build_key_secret(c, "w1", seed)
    _owned(secret)
    key = json.loads(secret["stringData"][w.KEY_FILE])
    assert key == {"name": f"{CORTEX}.{NAMESPACE}.witness/w1", "seed": seed.hex()}
    assert SigningKey(bytes.fromhex(key["seed"]))  # the CLI's --key-file reads this
    [(_, run)] = w.operator_run(c)
    claim = w.build_state_claim(c, "w1", run)
    _owned(claim)
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                             "resources": {"requests": {"storage": "32Mi"}}}
    account = w.build_service_account(c, "w1")
    _owned(account)
    assert account["metadata"]["name"] == BASE


def test_the_witness_reads_with_audit_read_alone_and_the_server_offers_it_nothing() -> None:
    c = witnessed(RUN, EXTERNAL)
    settings = server_settings(c, Satellites())
    assert settings["agents"] == [{"service_account": f"{NAMESPACE}/{BASE}",
                                   "agent_id": f"k8s:{NAMESPACE}/{BASE}",
                                   "scopes": ["audit.read"]}]
    assert settings["audit"]["witnesses"] == [EXTERNAL]  # the external one only


def test_an_external_witness_alone_renders_as_before() -> None:
    c = witnessed(EXTERNAL)
    assert w.operator_run(c) == []
    settings = server_settings(c, Satellites())
    assert settings["audit"]["witnesses"] == [EXTERNAL] and settings["agents"] == []
