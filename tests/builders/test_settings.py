"""Every tuning field of a MemoryCortex (and an AgentIdentity's quotas) reaches the server:
each is rendered into config.yaml by the builder, loaded with the server's own loader and
read back. Secrets reach it only as mounted files, and the audit signer's key Secret loads
as a signing key under the agent id config.yaml names."""

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attested_cortex.attest import keyfiles
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.loading import KeySource
from attested_cortex.builders.configmaps import Satellites, build_config_map
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.secrets import build_audit_signer_secret
from attested_cortex.server.settings import ServerSettings, load_settings
from attested_cortex.types import AgentId
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, Object, cortex, identity

Read = Callable[[ServerSettings], Any]
ENDPOINT = {"mode": "Endpoint", "url": "https://embed.example/v1/embeddings",
            "model": "text-embed-3", "dimension": 768,
            "apiKeySecretRef": {"name": "embed-key", "key": "token"}, "timeoutMs": 2500}
REFLECTION = {"reflection": {"url": "https://llm.example/v1", "model": "small-chat",
                             "apiKeySecretRef": {"name": "llm-key", "key": "token"},
                             "timeoutMs": 9000, "maxTokens": 300}}


def loaded(tmp_path: Path, c: Cortex, s: Satellites | None = None) -> ServerSettings:
    """config.yaml of the built ConfigMap, loaded exactly as ``cortexctl serve`` loads it."""
    path = tmp_path / "config.yaml"
    path.write_text(build_config_map(c, s or Satellites())["data"]["config.yaml"],
                    encoding="utf-8")
    return load_settings(path, {})


FIELDS: list[tuple[str, Object, Read, Any]] = [
    ("embedding none", {"embedding": {"mode": "None"}}, lambda s: s.embedder, "none"),
    ("embedding static", {"embedding": {"mode": "Static"}}, lambda s: s.embedder, "static"),
    ("embedding default", {"embedding": {"mode": "Default"}}, lambda s: s.embedder, "default"),
    ("embedding client", {"embedding": {"mode": "Client", "model": "m", "dimension": 8}},
     lambda s: (s.embedder, s.embedding.model, s.embedding.dimension), ("client", "m", 8)),
    ("embedding endpoint url", {"embedding": ENDPOINT}, lambda s: s.embedder,
     "https://embed.example/v1/embeddings"),
    ("embedding model", {"embedding": ENDPOINT}, lambda s: s.embedding.model, "text-embed-3"),
    ("embedding dimension", {"embedding": ENDPOINT}, lambda s: s.embedding.dimension, 768),
    ("embedding api key", {"embedding": ENDPOINT}, lambda s: s.embedding.api_key_file,
     Path("/var/run/cortex/embedding/api-key")),
    ("embedding timeout", {"embedding": ENDPOINT}, lambda s: s.embedding.timeout_ms, 2500),
    ("reflection endpoint", {"spokeMemory": REFLECTION},
     lambda s: s.spoke_memory.reflection and (
         s.spoke_memory.reflection.endpoint, s.spoke_memory.reflection.model,
         s.spoke_memory.reflection.timeout_ms, s.spoke_memory.reflection.max_tokens),
     ("https://llm.example/v1", "small-chat", 9000, 300)),
    ("write default deny", {"permissions": {"writeDefault": "Deny"}},
     lambda s: s.permissions.write_default, "deny"),
    ("write default ask", {"permissions": {"writeDefault": "AskUser"}},
     lambda s: s.permissions.write_default, "ask_user"),
    ("max body", {"limits": {"maxBodyBytes": 2048}}, lambda s: s.limits.max_body_bytes, 2048),
    ("max content", {"limits": {"maxContentChars": 1000}},
     lambda s: s.limits.max_content_chars, 1000),
    ("max metadata", {"limits": {"maxMetadataBytes": 512}},
     lambda s: s.limits.max_metadata_bytes, 512),
    ("recall pool", {"limits": {"recallPool": 50}}, lambda s: s.limits.recall_pool, 50),
    ("body timeout", {"limits": {"bodyReadTimeoutSeconds": 7}},
     lambda s: s.limits.body_read_timeout_s, 7),
    ("max answer", {"limits": {"maxAnswerBytes": 65536}},
     lambda s: s.limits.max_answer_bytes, 65536),
    ("max import", {"limits": {"maxImportBytes": 2048}},
     lambda s: s.limits.max_import_bytes, 2048),
    ("max staged", {"limits": {"maxStagedBytesPerAgent": 4096}},
     lambda s: s.limits.max_staged_bytes_per_agent, 4096),
    ("held per agent", {"approval": {"maxHeldPerAgent": 3}},
     lambda s: s.approval.max_held_per_agent, 3),
    ("held bytes", {"approval": {"maxHeldBytesPerAgent": 4096}},
     lambda s: s.approval.max_held_bytes_per_agent, 4096),
    ("approval retention", {"approval": {"retentionSeconds": 3600}},
     lambda s: s.approval.retention_seconds, 3600),
    ("lock timeout", {"database": {"managed": {}, "timeouts": {"lockMs": 250}}},
     lambda s: s.db_lock_timeout_ms, 250),
    ("statement timeout", {"database": {"managed": {}, "timeouts": {"statementMs": 9000}}},
     lambda s: s.db_statement_timeout_ms, 9000),
    ("log level", {"server": {"logLevel": "Debug"}}, lambda s: s.log_level, "DEBUG"),
    ("transcript size", {"transcripts": {"maxBytes": 4096}},
     lambda s: s.transcripts.max_bytes, 4096),
    ("quotas off", {"quotas": {"enabled": False}}, lambda s: s.quotas.enabled, False),
    ("signer off", {"audit": {"signer": {"mode": "Off"}}}, lambda s: s.audit_signer, None),
]


@pytest.mark.parametrize(("spec", "read", "expected"), [f[1:] for f in FIELDS],
                         ids=[f[0] for f in FIELDS])
def test_a_field_reaches_the_server(tmp_path: Path, spec: Object, read: Read,
                                    expected: Any) -> None:
    assert read(loaded(tmp_path, cortex(spec))) == expected


def test_an_empty_spec_gives_the_servers_own_defaults(tmp_path: Path) -> None:
    """The CRD's defaults are the server's: a cortex without these sections runs as a
    hand-configured server without them would (only the audit signer is added)."""
    got, server = loaded(tmp_path, cortex()), ServerSettings()
    assert got.limits == server.limits
    assert got.embedder == server.embedder == "minilm"
    assert got.embedding == server.embedding
    assert got.permissions.write_default == server.permissions.write_default
    assert (got.db_lock_timeout_ms, got.db_statement_timeout_ms, got.log_level) == (
        server.db_lock_timeout_ms, server.db_statement_timeout_ms, server.log_level)
    bounds = ("max_held_per_agent", "max_held_bytes_per_agent", "retention_seconds")
    assert [getattr(got.approval, b) for b in bounds] == [getattr(server.approval, b)
                                                          for b in bounds]
    assert got.transcripts.max_bytes == server.transcripts.max_bytes
    assert got.quotas.enabled and got.quotas.per_agent == []
    assert got.audit_signer == f"cortex:{NAMESPACE}/{CORTEX}"


def test_identity_quotas_are_per_agent_overrides(tmp_path: Path) -> None:
    ids = (identity("planner", spec={"quotas": {"requestsPerSecond": 5}}),
           identity("writer", agent_id="writer@team-a", spec={"quotas": {"storage": "1Gi"}}),
           identity("both", spec={"quotas": {"requestsPerSecond": 9, "storage": "10Mi"}}),
           identity("plain"))
    got = loaded(tmp_path, cortex(), Satellites(identities=ids)).quotas.per_agent
    assert [(q.agent_id, q.requests_per_second, q.storage_bytes) for q in got] == [
        (f"k8s:{NAMESPACE}/both", 9, 10 * 1024**2),
        (f"k8s:{NAMESPACE}/planner", 5, None),
        ("writer@team-a", None, 1024**3)]


def test_the_api_key_is_mounted_never_copied(tmp_path: Path) -> None:
    c = cortex({"embedding": ENDPOINT})
    assert "embed-key" not in json.dumps(build_config_map(c, Satellites()))
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "embedding-key")
    assert volume["secret"]["secretName"] == "embed-key"
    assert volume["secret"]["items"] == [{"key": "token", "path": "api-key"}]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "embedding-key")
    assert Path(mount["mountPath"], "api-key") == loaded(tmp_path, c).embedding.api_key_file


@pytest.mark.parametrize(("source", "volume"), [
    ({"image": "registry.example/models/bge:1"},
     {"image": {"reference": "registry.example/models/bge:1", "pullPolicy": "IfNotPresent"}}),
    ({"claimName": "models"}, {"persistentVolumeClaim": {"claimName": "models",
                                                         "readOnly": True}}),
], ids=["image", "claim"])
def test_a_model_of_ones_own_is_mounted_where_the_server_reads_it(
        tmp_path: Path, source: Object, volume: Object) -> None:
    c = cortex({"embedding": {"mode": "Onnx", "model": "team/bge", "onnx": {
        **source, "path": "bge-small", "modelSha256": "a" * 64, "tokenizerSha256": "b" * 64,
        "pooling": "CLS", "maxTokens": 512}}})
    got = loaded(tmp_path, c)
    assert got.embedder == "onnx" and got.embedding.model == "team/bge"
    onnx = got.embedding.onnx
    assert onnx is not None and (onnx.pooling, onnx.max_tokens) == ("cls", 512)
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    assert next(v for v in pod["volumes"] if v["name"] == "embedding-model") == {
        "name": "embedding-model", **volume}
    mount = next(m for m in pod["containers"][0]["volumeMounts"]
                 if m["name"] == "embedding-model")
    assert mount["readOnly"] is True
    assert onnx.spec("team/bge").onnx == Path(mount["mountPath"], "bge-small", "model.onnx")


def test_the_reflection_api_key_is_mounted_never_copied(tmp_path: Path) -> None:
    assert loaded(tmp_path, cortex()).spoke_memory.reflection is None  # the default engine
    c = cortex({"spokeMemory": REFLECTION})
    assert "llm-key" not in json.dumps(build_config_map(c, Satellites()))
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "reflection-key")
    assert volume["secret"] == {"secretName": "llm-key", "defaultMode": 0o440,
                                "items": [{"key": "token", "path": "api-key"}]}
    mount = next(m for m in pod["containers"][0]["volumeMounts"]
                 if m["name"] == "reflection-key")
    reflection = loaded(tmp_path, c).spoke_memory.reflection
    assert reflection is not None
    assert Path(mount["mountPath"], "api-key") == reflection.api_key_file


def test_the_audit_signer_key_loads_as_the_signer(tmp_path: Path) -> None:
    """The Secret the operator makes, mounted where the Deployment mounts it, is a signing
    key for exactly the agent id config.yaml names: the server starts and signs with it."""
    c = cortex()
    signer = loaded(tmp_path, c).audit_signer
    assert signer is not None
    secret = build_audit_signer_secret(c, keyfiles.identity_files(generate_key(AgentId(signer))),
                                       namespace_uid="ns-uid")
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "audit-signer")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "audit-signer")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"] == f"{CORTEX}-audit-signer"
    keys_root = tmp_path / "keys"
    directory = keys_root / Path(mount["mountPath"]).relative_to("/var/run/cortex/keys")
    directory.mkdir(parents=True)
    for item in volume["secret"]["items"]:
        (directory / item["path"]).write_bytes(base64.b64decode(secret["data"][item["key"]]))
    assert AgentId(signer) in KeySource(keys_root).snapshot().signing_keys


def test_signer_off_mounts_no_key() -> None:
    c = cortex({"audit": {"signer": {"mode": "Off"}}})
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    assert "audit-signer" not in {v["name"] for v in pod["volumes"]}


def test_a_setting_change_rolls_the_pods() -> None:
    """config.yaml is read once at start, so each of these changes the config hash."""
    def config_hash(c: Cortex) -> str:
        template = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]
        return str(template["metadata"]["annotations"]["cortex.attested.dev/config-hash"])

    before = config_hash(cortex())
    for spec in (f[1] for f in FIELDS):
        assert config_hash(cortex(spec)) != before, spec


def test_the_audit_signer_key_outlives_its_cortex() -> None:
    """Controlled by the cortex, owned by its Namespace too: deleting the cortex keeps the
    key the chain in the kept volume was signed with (e2e/test_system's re-made cortex)."""
    refs = build_audit_signer_secret(cortex(), {}, namespace_uid="ns-uid")["metadata"][
        "ownerReferences"]
    assert [(r["kind"], r.get("controller", False)) for r in refs] == [
        ("MemoryCortex", True), ("Namespace", False)]
    assert refs[1]["uid"] == "ns-uid"
