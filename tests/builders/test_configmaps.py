"""The configuration ConfigMap: config.yaml as the server loads it, hooks.yaml as the hook
loader parses it, and one keyring file per identity."""

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from attested_cortex.attest.keyring import build_keyring, parse_keyring_file
from attested_cortex.builders.configmaps import (
    Satellites,
    build_config_map,
    digest,
)
from attested_cortex.builders.hookfiles import hooks_in_force
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.quantities import quantity_bytes
from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.loading import parse_settings_text
from attested_cortex.server.configuring import agent_tiers, policy_from
from attested_cortex.server.settings import ServerSettings, load_settings
from tests.builders.specs import (
    CORTEX,
    NAMESPACE,
    Object,
    assert_child_metadata,
    chain,
    cortex,
    daemon_hook,
    exec_hook,
    identity,
    public_key,
    rule,
)


def settings(tmp_path: Path, c: Cortex | None = None,
             s: Satellites | None = None) -> ServerSettings:
    """config.yaml of the built ConfigMap, loaded exactly as ``cortexctl serve`` loads it."""
    data = build_config_map(c or cortex(), s or Satellites())["data"]
    path = tmp_path / "config.yaml"
    path.write_text(data["config.yaml"], encoding="utf-8")
    return load_settings(path, {})


def test_metadata_labels_and_owner() -> None:
    cm = build_config_map(cortex(), Satellites())
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert_child_metadata(cm, name=f"{CORTEX}-config", component="server")
    assert set(cm["data"]) == {"config.yaml", "hooks.yaml"}


def test_defaults_load(tmp_path: Path) -> None:
    loaded = settings(tmp_path)
    assert loaded.listen == ["0.0.0.0:8080"]
    assert loaded.auth == "kubernetes"
    assert loaded.graph_backend == "Auto"
    assert loaded.hooks_file == Path("/etc/cortex/hooks.yaml")
    assert loaded.keys_dir == Path("/var/run/cortex/keys")
    assert loaded.permissions.mode == "advisory" and loaded.permissions.rules == []
    assert loaded.approval.enabled and loaded.approval.timeout_seconds == 3600
    assert loaded.approval.hmac_secret_file == Path("/var/run/cortex/approval/hmac")
    assert loaded.transcripts.enabled is False
    assert loaded.quotas.requests_per_second == 100
    assert loaded.quotas.storage_per_agent_bytes == 100 * 1024 * 1024
    assert loaded.tokens_file is None


def test_no_database_uri_in_the_config_map() -> None:
    cm = build_config_map(cortex(), Satellites())
    assert "postgresql://" not in json.dumps(cm)
    assert "database_url" not in cm["data"]["config.yaml"]


def test_spec_settings_reach_the_server(tmp_path: Path) -> None:
    spec = {"graph": {"backend": "CTE"}, "permissions": {"mode": "Enforce"},
            "approval": {"timeoutSeconds": 600},
            "transcripts": {"enabled": True, "retentionDays": 30, "pruneAfterDays": 2,
                            "namespaces": [{"namespace": "support/**", "retentionDays": 90},
                                           {"namespace": "team/*"}]},
            "quotas": {"requestsPerSecond": 25, "storagePerAgent": "1.5Gi"},
            "server": {"auth": {"mode": "Tokens", "tokensSecretRef": {"name": "agent-tokens"}}}}
    loaded = settings(tmp_path, cortex(spec))
    assert loaded.graph_backend == "CTE"
    assert loaded.permissions.mode == "enforce"
    assert loaded.approval.timeout_seconds == 600
    assert loaded.transcripts.enabled and loaded.transcripts.retention_days == 30
    assert loaded.transcripts.prune_after_days == 2
    assert [(n.namespace, n.retention_days) for n in loaded.transcripts.namespaces] == [
        ("support/**", 90), ("team/*", None)]
    assert loaded.quotas.requests_per_second == 25
    assert loaded.quotas.storage_per_agent_bytes == 1536 * 1024 * 1024
    assert loaded.auth == "tokens"
    assert loaded.tokens_file == Path("/etc/cortex-tokens/tokens")


def test_approval_disabled_has_no_hmac_file(tmp_path: Path) -> None:
    loaded = settings(tmp_path, cortex({"approval": {"enabled": False}}))
    assert loaded.approval.enabled is False and loaded.approval.hmac_secret_file is None


@pytest.mark.parametrize(("quantity", "expected"), [
    ("100Mi", 100 * 1024**2), ("1Gi", 1024**3), ("512Ki", 512 * 1024), ("2k", 2000),
    ("3M", 3_000_000), ("1.5Gi", 3 * 1024**3 // 2), ("4096", 4096), ("1Ti", 1024**4),
    ("2E", 2 * 1000**6),
])
def test_quotas_in_bytes(quantity: str, expected: int) -> None:
    assert quantity_bytes(quantity) == expected


def test_rules_in_evaluation_order(tmp_path: Path) -> None:
    rules = (rule("b-allow", {"priority": 10}), rule("z-deny", {"decision": "Deny"}),
             rule("a-ask", {"decision": "AskUser", "priority": 10, "reason": "humans decide",
                            "namespace": "team/secrets/*", "inherit": False}),
             rule("c-low", {"priority": -5, "agents": ["k8s:team-a/b", "k8s:team-a/a"],
                            "operations": ["store", "recall"]}))
    loaded = settings(tmp_path, s=Satellites(rules=rules))
    assert [r.source for r in loaded.permissions.rules] == [
        f"{NAMESPACE}/a-ask", f"{NAMESPACE}/b-allow", f"{NAMESPACE}/z-deny", f"{NAMESPACE}/c-low"]
    ask = loaded.permissions.rules[0]
    assert (ask.decision, ask.namespace, ask.inherit, ask.priority, ask.reason) == (
        "ask_user", "team/secrets/*", False, 10, "humans decide")
    low = loaded.permissions.rules[3]
    assert low.agents == ["k8s:team-a/a", "k8s:team-a/b"]
    assert low.operations == ["recall", "store"]


def test_agent_mapping_from_service_account_refs(tmp_path: Path) -> None:
    ids = (identity("planner", service_account="planner-sa"),
           identity("writer", service_account="writer-sa", agent_id="writer@team-a"),
           identity("scout", custody="Agent"))
    loaded = settings(tmp_path, s=Satellites(identities=ids))
    assert [(m.service_account, m.agent_id) for m in loaded.agents] == [
        (f"{NAMESPACE}/planner-sa", f"k8s:{NAMESPACE}/planner"),
        (f"{NAMESPACE}/writer-sa", "writer@team-a")]


def test_hooks_file_parses_with_the_server_loader() -> None:
    hooks = hooks_in_force([chain("main", [exec_hook("tag", timeoutMs=300, failMode="Closed"),
                                           daemon_hook("redact")])])
    text = build_config_map(cortex(), Satellites(hooks=tuple(hooks)))["data"]["hooks.yaml"]
    parsed = {h.name: h for h in parse_settings_text(text).hooks}
    assert parsed["tag"].mode == "exec"
    assert parsed["tag"].command == ("/hooks/tag", "--strict")
    assert parsed["tag"].timeout_ms == 300 and parsed["tag"].fail_mode == "closed"
    assert parsed["redact"].mode == "remote"
    assert parsed["redact"].address == "unix:///var/run/cortex/hooks/redact.sock"
    assert parsed["redact"].events == ("post_recall",)


def test_empty_hooks_file_parses() -> None:
    text = build_config_map(cortex(), Satellites())["data"]["hooks.yaml"]
    assert parse_settings_text(text).hooks == ()


def test_priority_sign_flip_keeps_the_crd_order() -> None:
    """The CRD runs lower priority first; the hook file runs higher first."""
    hooks = hooks_in_force([chain("main", [exec_hook("last", priority=50),
                                           exec_hook("first", priority=-20),
                                           exec_hook("middle")])])
    text = build_config_map(cortex(), Satellites(hooks=tuple(hooks)))["data"]["hooks.yaml"]
    parsed = parse_settings_text(text).hooks
    crd_order = [h.name for h in sorted(hooks, key=lambda h: h.priority)]
    file_order = [h.name for h in sorted(parsed, key=lambda h: -h.priority)]
    assert crd_order == file_order == ["first", "middle", "last"]


def test_keyring_files_parse_and_name_the_agent() -> None:
    ids = (identity("planner"), identity("scout", custody="Agent", agent_id="scout@team-a"))
    data = build_config_map(cortex(), Satellites(identities=ids))["data"]
    assert {k for k in data if k.startswith("keyring-")} == {"keyring-planner.json",
                                                             "keyring-scout.json"}
    scout = parse_keyring_file(json.loads(data["keyring-scout.json"]))
    assert [(r.agent_id, r.revision) for r in scout] == [("scout@team-a", 1)]
    planner = parse_keyring_file(json.loads(data["keyring-planner.json"]))
    assert planner[0].agent_id == f"k8s:{NAMESPACE}/planner"
    assert planner[0].valid_from is None and planner[0].valid_until is None


def test_keyring_windows_chain_across_rotations() -> None:
    first = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
    second = datetime(2026, 6, 1, 3, 0, tzinfo=UTC)
    ident = identity("planner", revision=3, retired=[first, second])
    data = build_config_map(cortex(), Satellites(identities=(ident,)))["data"]
    revisions = parse_keyring_file(json.loads(data["keyring-planner.json"]))
    assert [r.revision for r in revisions] == [1, 2, 3]
    assert revisions[0].valid_from is None
    for older, newer in itertools.pairwise(revisions):
        assert older.valid_until is not None
        assert older.valid_until == newer.valid_from
    assert revisions[-1].valid_until is None
    assert revisions[0].valid_until == int(first.timestamp() * 1000)
    # A signature made just before a rotation verifies with the old key, just after with the new.
    ring = build_keyring(revisions)
    at = int(first.timestamp() * 1000)
    assert [r.revision for r in ring.keys_at(f"k8s:{NAMESPACE}/planner", at - 1)] == [1]
    assert [r.revision for r in ring.keys_at(f"k8s:{NAMESPACE}/planner", at)] == [2]
    assert revisions[2].public_key != revisions[1].public_key
    assert ident.status.public_key == public_key(3)[0]


def test_identity_without_a_key_has_no_keyring_file() -> None:
    from attested_cortex.builders.inputs import parse_identity
    from tests.builders.specs import body

    keyless = parse_identity(body("AgentIdentity", "fresh", {"cortexRef": {"name": CORTEX}}))
    data = build_config_map(cortex(), Satellites(identities=(keyless,)))["data"]
    assert not [k for k in data if k.startswith("keyring-")]


def test_same_inputs_same_bytes() -> None:
    def build() -> Object:
        return build_config_map(cortex(), Satellites(
            identities=(identity("planner"),), rules=(rule("r1"), rule("r2")),
            hooks=tuple(hooks_in_force([chain("main", [daemon_hook("redact")])]))))
    assert build() == build()
    assert digest(build()) == digest(build())


def test_identity_scopes_reach_the_agent_mapping_and_load(tmp_path: Path) -> None:
    scoped = identity("scout", service_account="scout-sa",
                      spec={"scopes": ["memory.read:team/**", "graph.read"]})
    plain = identity("planner", service_account="planner-sa")
    data = build_config_map(cortex(), Satellites(identities=(scoped, plain)))["data"]
    path = tmp_path / "config.yaml"
    path.write_text(data["config.yaml"])
    agents = {a.service_account: a for a in load_settings(path, {}).agents}
    assert agents[f"{NAMESPACE}/scout-sa"].scopes == ["graph.read", "memory.read:team/**"]
    assert agents[f"{NAMESPACE}/planner-sa"].scopes is None  # all but memory.override


def test_trust_reaches_the_server(tmp_path: Path) -> None:
    """spec.trust and trustTier as config.yaml holds them, and as the server loads them."""
    spec = {"trust": {"defaultTier": "SemiTrusted", "ceilings": {
        "Untrusted": {"memory.read": "qualified:public/docs/**"},
        "SemiTrusted": {"graph.read": "granted"}}}}
    tiered = identity("scout", service_account="scout-sa", spec={"trustTier": "Untrusted"})
    plain = identity("planner", service_account="planner-sa")
    built = build_config_map(cortex(spec), Satellites(identities=(tiered, plain)))
    document = yaml.safe_load(built["data"]["config.yaml"])
    assert document["trust"] == {"default_tier": "SemiTrusted", "ceilings": {
        "SemiTrusted": {"graph.read": "granted"},
        "Untrusted": {"memory.read": "qualified:public/docs/**"}}}
    assert [a.get("trust_tier") for a in document["agents"]] == [None, "Untrusted"]

    loaded = settings(tmp_path, cortex(spec), Satellites(identities=(tiered, plain)))
    ceilings = policy_from(loaded).ceilings
    assert str(ceilings["Untrusted"].mark("memory.read")) == "qualified:public/docs/**"
    assert str(ceilings["SemiTrusted"].mark("graph.read")) == "granted"
    assert str(ceilings["SemiTrusted"].mark("memory.forget")) == "qualified"  # a default
    assert agent_tiers(loaded) == {f"{NAMESPACE}/scout-sa": "Untrusted"}


def test_a_bad_ceiling_pattern_stops_the_server(tmp_path: Path) -> None:
    """A mark the CRD's regex admits but the namespace grammar does not: the loader names it."""
    loaded = settings(tmp_path, cortex({"trust": {"ceilings": {
        "Untrusted": {"memory.read": "qualified:a/../b"}}}}))
    with pytest.raises(InvalidInputError, match="segment"):
        policy_from(loaded)


def test_encryption_at_rest_reaches_the_server(tmp_path: Path) -> None:
    """spec.encryption.atRest (ADR 0056), rendered beside the master key: unset stays unset
    (the server takes the cortex's own default, ADR 0079); true and false as written."""
    unset = settings(tmp_path)
    assert unset.encryption.at_rest is None and unset.master_key is not None
    loaded = settings(tmp_path, cortex({"encryption": {"atRest": True}}))
    assert loaded.encryption.at_rest is True and loaded.master_key is not None
    assert loaded.encryption.sealed_namespaces == []
    assert settings(tmp_path, cortex({"encryption": {"atRest": False}})).encryption.at_rest is False


def test_sealed_namespaces_reach_the_server(tmp_path: Path) -> None:
    """spec.encryption.sealedNamespaces (ADR 0057 item 2): the patterns, in the server's
    pattern language (a pattern the CRD admits but the grammar does not stops the server)."""
    loaded = settings(tmp_path, cortex({"encryption": {
        "atRest": True, "sealedNamespaces": ["medical/**", "team/*/private"]}}))
    assert loaded.encryption.sealed_namespaces == ["medical/**", "team/*/private"]
    with pytest.raises(InvalidInputError, match="segment"):
        settings(tmp_path, cortex({"encryption": {"sealedNamespaces": ["a/../b"]}}))
