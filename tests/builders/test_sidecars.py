"""Daemon hooks as sidecar containers of the server pod."""

import re

import pytest

from attested_cortex.builders.sidecars import build_sidecar, build_sidecars, container_name
from tests.builders.specs import chain, daemon_hook, env_of, exec_hook


def test_sidecar_container() -> None:
    hook = chain("c", [daemon_hook("redact", sidecar={
        "image": "registry.example/redact:3", "command": ["cortexctl", "hookd"],
        "env": [{"name": "LEVEL", "value": "strict"}],
        "resources": {"limits": {"memory": "64Mi"}}})]).spec.hooks[0]
    side = build_sidecar(hook, "Always")
    assert side["name"] == "hook-redact"
    assert side["image"] == "registry.example/redact:3"
    assert side["imagePullPolicy"] == "Always"
    assert side["command"] == ["cortexctl", "hookd"]
    assert side["resources"] == {"limits": {"memory": "64Mi"}}
    env = env_of(side)
    assert env["LEVEL"]["value"] == "strict"
    assert env["CORTEX_HOOK_ADDRESS"]["value"] == "unix:///var/run/cortex/hooks/redact.sock"
    assert {m["mountPath"] for m in side["volumeMounts"]} == {"/var/run/cortex/hooks", "/tmp"}


def test_no_command_uses_the_image_entry_point() -> None:
    side = build_sidecar(chain("c", [daemon_hook("redact")]).spec.hooks[0], "IfNotPresent")
    assert "command" not in side and "args" not in side


def test_security_context_is_restricted() -> None:
    sc = build_sidecar(chain("c", [daemon_hook("redact")]).spec.hooks[0], "IfNotPresent")[
        "securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_only_daemon_hooks_in_name_order() -> None:
    hooks = chain("c", [daemon_hook("zeta"), exec_hook("tag"), daemon_hook("alpha")]).spec.hooks
    assert [s["name"] for s in build_sidecars(hooks, "IfNotPresent")] == [
        "hook-alpha", "hook-zeta"]


def test_exec_hook_has_no_sidecar() -> None:
    with pytest.raises(ValueError, match="tag"):
        build_sidecar(chain("c", [exec_hook("tag")]).spec.hooks[0], "IfNotPresent")


def test_container_names_are_distinct_for_long_hook_names() -> None:
    """Hook names are DNS labels of up to 63 characters; their containers must not clash."""
    one, two = "h" * 60 + "one", "h" * 60 + "two"
    assert container_name(one) != container_name(two)
    assert len(container_name(one)) <= 63


@pytest.mark.parametrize("hook", ["a" * 57 + "-bcde", "x" * 63, "redact"])
def test_container_name_is_a_dns_label(hook: str) -> None:
    name = container_name(hook)
    assert len(name) <= 63 and re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name), name


def test_sidecar_finds_its_server_and_token_under_kubernetes_auth() -> None:
    """A hook that calls the cortex back (auto-link) crashed on the real node without these."""
    hook = chain("c", [daemon_hook("auto-link")]).spec.hooks[0]
    env = env_of(build_sidecar(hook, "IfNotPresent", server_port=8080, token_file=True))
    assert env["CORTEX_URL"]["value"] == "http://127.0.0.1:8080"
    assert env["CORTEX_TOKEN_FILE"]["value"] == (
        "/var/run/secrets/kubernetes.io/serviceaccount/token")
    assert "CORTEX_TOKEN_FILE" not in env_of(build_sidecar(hook, "IfNotPresent"))


def test_sidecar_env_set_by_the_hook_wins() -> None:
    hook = chain("c", [daemon_hook("auto-link", sidecar={
        "image": "x", "env": [{"name": "CORTEX_URL", "value": "http://127.0.0.1:9999"}]})]
    ).spec.hooks[0]
    env = env_of(build_sidecar(hook, "IfNotPresent", token_file=True))
    assert env["CORTEX_URL"]["value"] == "http://127.0.0.1:9999"
