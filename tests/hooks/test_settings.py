"""Config validation: every rejection names the hook and says what is wrong; defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attested_cortex.hooks import HookConfigError, load_settings, parse_settings
from attested_cortex.hooks.loading import parse_settings_text


def one(**fields: Any) -> dict[str, Any]:
    return {"hooks": [{"name": "h1", "events": ["pre_store"], "command": ["true"], **fields}]}


def test_defaults() -> None:
    spec = parse_settings(one()).hooks[0]
    assert (spec.mode, spec.priority, spec.fail_mode, spec.timeout_ms) == ("exec", 0, "open", 5000)
    assert spec.namespaces == () and spec.command == ("true",)


def test_hot_path_events_default_to_daemon_and_the_tightest_deadline() -> None:
    spec = parse_settings(one(events=["post_recall", "post_store"])).hooks[0]
    assert (spec.mode, spec.timeout_ms) == ("daemon", 2000)


def test_command_string_is_split() -> None:
    spec = parse_settings(one(command="python -m my.hook --flag 'a b'")).hooks[0]
    assert spec.command == ("python", "-m", "my.hook", "--flag", "a b")


def test_exec_on_hot_path_needs_explicit_override() -> None:
    spec = parse_settings(one(events=["pre_recall"], mode="exec",
                              allow_exec_on_hot_path=True)).hooks[0]
    assert spec.mode == "exec"


def test_remote_hook() -> None:
    spec = parse_settings(one(mode="remote", command=None, address="unix:///run/h.sock"))
    assert spec.hooks[0].address == "unix:///run/h.sock"


def test_empty_documents_mean_no_hooks(tmp_path: Path) -> None:
    assert parse_settings(None).hooks == ()
    assert parse_settings_text("").hooks == ()
    assert parse_settings({"version": 1, "hooks": []}).hooks == ()
    assert load_settings(tmp_path / "absent.yaml").hooks == ()


def test_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text("version: 1\nhooks:\n  - name: a\n    events: [post_store]\n"
                    "    mode: daemon\n    command: [python, hook.py]\n    priority: 7\n")
    assert load_settings(path).hooks[0].priority == 7


REJECTIONS = [
    (one(events=["pre_nothing"]), "unknown event 'pre_nothing'"),
    (one(events=[]), "at least one event"),
    (one(events="pre_store"), "'events' must be a list"),
    (one(timeout_ms=5001), "exceeds the write class deadline of 5000 ms"),
    (one(events=["pre_store", "pre_index"], timeout_ms=1500), "index class deadline of 1000"),
    (one(timeout_ms=0), "'timeout_ms' must be at least 1"),
    (one(timeout_ms="fast"), "'timeout_ms' must be an integer"),
    (one(events=["post_recall"], mode="exec"), "allow_exec_on_hot_path"),
    (one(events=["pre_search"], mode="exec", allow_exec_on_hot_path="yes"),
     "must be true or false"),
    (one(mode="sidecar"), "'mode' must be one of"),
    (one(fail_mode="maybe"), "'fail_mode' must be one of"),
    (one(priority=True), "'priority' must be an integer"),
    (one(command=[]), "need 'command'"),
    (one(command=None, mode="daemon"), "need 'command'"),
    (one(mode="remote"), "remote hooks take 'address', not 'command'"),
    (one(mode="remote", command=None), "remote hooks need 'address'"),
    (one(mode="remote", command=None, address="http://x:1"), "tcp:// or unix://"),
    (one(mode="remote", command=None, address="tcp://host"), "tcp://HOST:PORT"),
    (one(mode="remote", command=None, address="unix://relative"), "absolute path"),
    (one(address="tcp://h:1"), "only for mode: remote"),
    # Used to load, then end the supervisor on the resolver's UnicodeError: "starting" for ever.
    (one(mode="remote", command=None, address="tcp://a..b:80"), "bad host name"),
    (one(mode="remote", command=None, address=f"tcp://{'a' * 64}.x:80"), "bad host name"),
    (one(namespaces="team-a"), "'namespaces' must be a list"),
    (one(env={"A": 1}), "'env' must map strings to strings"),
    # Each used to load, then fail every fire with ValueError (a 500) or kill the daemon's
    # supervisor; refused with the file, the old configuration stays live.
    (one(command=["tr\x00ue"]), "'command' must not contain NUL"),
    (one(env={"A=B": "c"}), "not a valid environment variable"),
    (one(env={"": "c"}), "not a valid environment variable"),
    (one(env={"A": "b\x00"}), "not a valid environment variable"),
    (one(max_in_flight=0), "'max_in_flight' must be at least 1"),
    (one(colour="blue"), "unknown keys ['colour']"),
]


@pytest.mark.parametrize(("document", "message"), REJECTIONS)
def test_rejections_name_the_hook(document: dict[str, Any], message: str) -> None:
    with pytest.raises(HookConfigError, match="hook 'h1'") as caught:
        parse_settings(document)
    assert message in caught.value.message
    assert caught.value.details["hook"] == "h1"
    assert caught.value.http_status == 400


@pytest.mark.parametrize(("document", "message"), [
    ([], "must be an object"),
    ({"hooks": {}}, "'hooks' must be a list"),
    ({"version": 2, "hooks": []}, "unsupported hook config version 2"),
    ({"hooks": [], "extra": 1}, "must be an object with 'version' and 'hooks'"),
    ({"hooks": ["x"]}, "hooks[0] must be an object"),
    ({"hooks": [{"name": "Bad Name!"}]}, "'name' must be a DNS-like name"),
    ({"hooks": [one()["hooks"][0], one()["hooks"][0]]}, "the name is used twice"),
])
def test_document_rejections(document: Any, message: str) -> None:
    with pytest.raises(HookConfigError) as caught:
        parse_settings(document)
    assert message in caught.value.message


def test_unparseable_text() -> None:
    with pytest.raises(HookConfigError, match="not valid YAML/JSON"):
        parse_settings_text("hooks: [unclosed")
