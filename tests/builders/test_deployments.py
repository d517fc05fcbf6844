"""The memory server Deployment: server container, Daemon-hook sidecars, key mounts and the
config-hash that decides when the pods roll."""

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from attested_cortex.builders.configmaps import Satellites, build_config_map
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.hookfiles import hooks_in_force
from attested_cortex.builders.inputs import Cortex
from attested_cortex.hooks.loading import parse_settings_text
from tests.builders.specs import (
    CORTEX,
    DEFAULTS,
    Object,
    assert_child_metadata,
    assert_restricted,
    chain,
    container,
    containers_of,
    cortex,
    daemon_hook,
    env_of,
    exec_hook,
    external_cortex,
    identity,
    rule,
)

HASH = "cortex.attested.dev/config-hash"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def satellites(*, hooks: list[Object] | None = None, **kwargs: Any) -> Satellites:
    """Satellites with the hooks of one valid chain."""
    in_force = hooks_in_force([chain("main", hooks)]) if hooks else []
    return Satellites(hooks=tuple(in_force), **kwargs)


def deploy(c: Cortex | None = None, s: Satellites | None = None) -> Object:
    return build_deployment(c or cortex(), DEFAULTS, s or Satellites())


def config_hash(c: Cortex | None = None, s: Satellites | None = None) -> str:
    return str(deploy(c, s)["spec"]["template"]["metadata"]["annotations"][HASH])


def template(c: Cortex | None = None, s: Satellites | None = None) -> Object:
    return deploy(c, s)["spec"]["template"]


def volume(tmpl: Object, name: str) -> Object:
    return next(v for v in tmpl["spec"]["volumes"] if v["name"] == name)


def test_metadata_labels_and_owner() -> None:
    dep = deploy()
    assert dep["apiVersion"] == "apps/v1" and dep["kind"] == "Deployment"
    assert_child_metadata(dep, name=f"{CORTEX}-server", component="server")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels == dep["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == f"{CORTEX}-server"


def test_replicas_from_spec() -> None:
    assert deploy(cortex({"server": {"replicas": 3}}))["spec"]["replicas"] == 3
    assert deploy()["spec"]["replicas"] == 1


def test_pod_template_is_restricted_with_sidecars_and_keys() -> None:
    s = satellites(hooks=[daemon_hook("redact"), daemon_hook("audit"), exec_hook("tag")],
                   identities=(identity("planner"),))
    tmpl = template(cortex({"server": {"auth": {
        "mode": "Tokens", "tokensSecretRef": {"name": "agent-tokens"}}}}), s)
    assert len(containers_of(tmpl)) == 3
    assert_restricted(tmpl)


def test_server_container() -> None:
    server = container(template(), "server")
    assert server["image"] == DEFAULTS.server_image
    assert server["command"] == ["cortexctl"]
    assert server["args"] == ["serve", "--config", "/etc/cortex/config.yaml"]
    assert server["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert env_of(server)["CORTEX_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": f"{CORTEX}-db-credentials", "key": "uri"}}
    assert container(template(cortex({"server": {"image": "mirror.example/c:9"}})),
                     "server")["image"] == "mirror.example/c:9"


def test_external_database_url() -> None:
    server = container(template(external_cortex()), "server")
    assert env_of(server)["CORTEX_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "shared-pg", "key": "dsn"}}


def test_one_sidecar_per_daemon_hook_none_for_exec() -> None:
    s = satellites(hooks=[daemon_hook("redact"), exec_hook("tag"), daemon_hook("audit")])
    names = [c["name"] for c in template(s=s)["spec"]["containers"]]
    assert names == ["server", "hook-audit", "hook-redact"]


def test_sidecar_listens_where_the_hook_file_says() -> None:
    s = satellites(hooks=[daemon_hook("redact")])
    files = build_config_map(cortex(), s)["data"]
    hook = parse_settings_text(files["hooks.yaml"]).hooks[0]
    assert hook.mode == "remote"
    sidecar = container(template(s=s), "hook-redact")
    assert env_of(sidecar)["CORTEX_HOOK_ADDRESS"]["value"] == hook.address
    socket_dir = hook.address.removeprefix("unix://").rpartition("/")[0]
    server = container(template(s=s), "server")
    for c in (sidecar, server):
        mount = next(m for m in c["volumeMounts"] if m["mountPath"] == socket_dir)
        assert volume(template(s=s), mount["name"])["emptyDir"]


def test_cortex_custody_key_secret_is_mounted() -> None:
    tmpl = template(s=Satellites(identities=(identity("planner"),)))
    secret = volume(tmpl, "key-planner")["secret"]
    assert secret["secretName"] == "planner-agent-key"
    assert {i["key"] for i in secret["items"]} >= {"private.pem", "agent-id"}
    mount = next(m for m in container(tmpl, "server")["volumeMounts"]
                 if m["name"] == "key-planner")
    assert mount["readOnly"] is True
    assert mount["mountPath"] == "/var/run/cortex/keys/planner"


def test_agent_custody_key_is_never_mounted_only_its_public_key_in_the_keyring() -> None:
    agent = identity("scout", custody="Agent", secret_name="scout-agent-key")
    tmpl = template(s=Satellites(identities=(agent,)))
    secrets = [v["secret"]["secretName"] for v in tmpl["spec"]["volumes"] if "secret" in v]
    assert "scout-agent-key" not in secrets
    keyring = volume(tmpl, "keyring")["configMap"]
    assert keyring["name"] == f"{CORTEX}-config"
    assert "items" not in keyring  # the whole ConfigMap: new keyring files appear in place
    mount = next(m for m in container(tmpl, "server")["volumeMounts"] if m["name"] == "keyring")
    assert mount["mountPath"] == "/var/run/cortex/keys/_keyring"


def test_a_new_agent_custody_identity_rolls_nothing() -> None:
    before = template(s=Satellites())
    after = template(s=Satellites(identities=(identity("scout", custody="Agent"),)))
    assert after == before


def test_identity_without_secret_name_is_not_mounted() -> None:
    tmpl = template(s=Satellites(identities=(identity("planner", secret_name=None),)))
    assert not [v for v in tmpl["spec"]["volumes"] if v["name"].startswith("key-")]


def assert_valid_volumes(tmpl: Object) -> None:
    """Volume names are unique DNS labels; no container mounts two volumes at one path."""
    volumes = [v["name"] for v in tmpl["spec"]["volumes"]]
    assert len(volumes) == len(set(volumes)), volumes
    for name in volumes:
        assert len(name) <= 63 and re.match(DNS_LABEL, name), name
    for c in containers_of(tmpl):
        paths = [m["mountPath"] for m in c["volumeMounts"]]
        assert len(paths) == len(set(paths)), (c["name"], paths)


# AgentIdentity names are DNS subdomains: dots allowed, up to 253 characters, any word.
def test_identity_name_with_a_dot_gives_a_valid_volume() -> None:
    assert_valid_volumes(template(s=Satellites(identities=(identity("planner.v2"),))))


def test_long_identity_names_sharing_a_prefix_give_distinct_volumes() -> None:
    ids = (identity("a" * 70 + "-one"), identity("a" * 70 + "-two"))
    assert_valid_volumes(template(s=Satellites(identities=ids)))


def test_identity_named_keyring_does_not_collide_with_the_keyring_mount() -> None:
    ids = (identity("keyring"), identity("scout", custody="Agent"))
    assert_valid_volumes(template(s=Satellites(identities=ids)))


def test_ordinary_identities_give_valid_volumes() -> None:
    ids = (identity("planner"), identity("writer"), identity("scout", custody="Agent"))
    assert_valid_volumes(template(s=Satellites(identities=ids)))


def test_service_account_token_only_for_kubernetes_auth() -> None:
    assert template()["spec"]["automountServiceAccountToken"] is True
    tokens = cortex({"server": {"auth": {"mode": "Tokens",
                                         "tokensSecretRef": {"name": "agent-tokens"}}}})
    assert template(tokens)["spec"]["automountServiceAccountToken"] is False


def test_tokens_secret_mounted_for_tokens_auth() -> None:
    tokens = cortex({"server": {"auth": {"mode": "Tokens", "tokensSecretRef": {
        "name": "agent-tokens", "key": "hashes"}}}})
    tmpl = template(tokens)
    assert volume(tmpl, "tokens")["secret"]["secretName"] == "agent-tokens"
    assert volume(tmpl, "tokens")["secret"]["items"] == [{"key": "hashes", "path": "tokens"}]
    mount = next(m for m in container(tmpl, "server")["volumeMounts"] if m["name"] == "tokens")
    assert mount == {"name": "tokens", "mountPath": "/etc/cortex-tokens", "readOnly": True}
    assert "tokens" not in [v["name"] for v in template()["spec"]["volumes"]]


def test_approval_key_mounted_only_when_enabled() -> None:
    assert volume(template(), "approval")["secret"]["secretName"] == f"{CORTEX}-approval-hmac"
    own = cortex({"approval": {"hmacSecretRef": {"name": "my-hmac", "key": "k"}}})
    assert volume(template(own), "approval")["secret"] == {
        "secretName": "my-hmac", "defaultMode": 0o440, "items": [{"key": "k", "path": "hmac"}]}
    off = cortex({"approval": {"enabled": False}})
    assert "approval" not in [v["name"] for v in template(off)["spec"]["volumes"]]


def test_rolls_without_downtime() -> None:
    strategy = deploy()["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def test_same_inputs_same_hash() -> None:
    s = satellites(hooks=[daemon_hook("redact")], identities=(identity("planner"),))
    assert deploy(cortex(), s) == deploy(cortex(), s)


def test_replicas_do_not_roll_the_pods() -> None:
    assert config_hash(cortex({"server": {"replicas": 4}})) == config_hash()


def test_adding_a_daemon_hook_rolls_the_pods() -> None:
    before = satellites(hooks=[exec_hook("tag")])
    after = satellites(hooks=[exec_hook("tag"), daemon_hook("redact")])
    assert config_hash(s=before) != config_hash(s=after)


@pytest.mark.parametrize("change", [
    {"command": ["/hooks/tag", "--lenient"]}, {"timeoutMs": 250}, {"priority": 7},
    {"failMode": "Closed"}, {"events": ["pre_store", "pre_update"]},
])
def test_hook_file_only_change_of_an_exec_hook_rolls_nothing(change: Object) -> None:
    before = satellites(hooks=[exec_hook("tag"), daemon_hook("redact")])
    after = satellites(hooks=[exec_hook("tag", **change), daemon_hook("redact")])
    assert build_config_map(cortex(), before)["data"]["hooks.yaml"] != \
        build_config_map(cortex(), after)["data"]["hooks.yaml"]
    assert config_hash(s=before) == config_hash(s=after)


def test_daemon_hook_priority_change_rolls_nothing() -> None:
    before = satellites(hooks=[daemon_hook("redact")])
    after = satellites(hooks=[daemon_hook("redact", priority=5)])
    assert config_hash(s=before) == config_hash(s=after)


def test_daemon_hook_image_change_rolls_the_pods() -> None:
    before = satellites(hooks=[daemon_hook("redact")])
    after = satellites(hooks=[daemon_hook("redact", sidecar={"image": "hooks/redact:2"})])
    assert config_hash(s=before) != config_hash(s=after)


def test_rule_change_rolls_the_pods() -> None:
    before = Satellites(rules=(rule("allow-team"),))
    after = Satellites(rules=(rule("allow-team", {"decision": "Deny"}),))
    assert config_hash(s=before) != config_hash(s=after)
    assert config_hash(s=before) != config_hash(s=Satellites())


def test_image_change_rolls_the_pods() -> None:
    assert config_hash(cortex({"server": {"image": "cortex/server:1.5.0"}})) != config_hash()


def test_auth_mode_change_rolls_the_pods() -> None:
    tokens = cortex({"server": {"auth": {"mode": "Tokens",
                                         "tokensSecretRef": {"name": "agent-tokens"}}}})
    assert config_hash(tokens) != config_hash()


def test_key_rotation_rolls_nothing() -> None:
    """A rotated key reaches the pods through the mounted Secret and keyring: no restart."""
    rotated_at = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
    before = Satellites(identities=(identity("planner"), identity("scout", custody="Agent")))
    after = Satellites(identities=(identity("planner", revision=2, retired=[rotated_at]),
                                   identity("scout", custody="Agent", revision=2,
                                            retired=[rotated_at])))
    assert build_config_map(cortex(), before)["data"] != build_config_map(cortex(), after)["data"]
    assert config_hash(s=before) == config_hash(s=after)
