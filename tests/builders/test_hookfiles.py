"""HookChains validated as the server will load them and rendered into the hook file."""

from attested_cortex.builders.hookfiles import (
    check_hooks,
    hook_entry,
    hooks_in_force,
    render_hooks_file,
    socket_address,
    validate_chains,
)
from attested_cortex.builders.inputs import Chain
from attested_cortex.hooks.loading import parse_settings
from tests.builders.specs import chain, daemon_hook, exec_hook


def names_in_force(*chains: Chain) -> list[str]:
    return [h.name for h in hooks_in_force(chains)]


def test_exec_entry() -> None:
    tag = exec_hook("tag", priority=3, timeoutMs=200, failMode="Closed")
    hook = chain("c", [tag]).spec.hooks[0]
    assert hook_entry(hook) == {"name": "tag", "events": ["pre_store"], "priority": -3,
                                "timeout_ms": 200, "fail_mode": "closed", "mode": "exec",
                                "command": ["/hooks/tag", "--strict"]}


def test_daemon_entry_is_a_remote_hook_on_its_socket() -> None:
    hook = chain("c", [daemon_hook("redact")]).spec.hooks[0]
    entry = hook_entry(hook)
    assert entry["mode"] == "remote"
    assert entry["address"] == socket_address("redact") == "unix:///var/run/cortex/hooks/redact.sock"
    assert "command" not in entry


def test_rendered_file_is_what_the_loader_accepts() -> None:
    hooks = chain("c", [exec_hook("tag"), daemon_hook("redact")]).spec.hooks
    parsed = parse_settings(render_hooks_file(hooks))
    assert [h.name for h in parsed.hooks] == ["tag", "redact"]


def test_valid_chains_are_all_in_force() -> None:
    a = chain("alpha", [exec_hook("tag"), daemon_hook("redact")])
    b = chain("beta", [exec_hook("audit")])
    assert validate_chains([b, a]) == {"alpha": None, "beta": None}
    assert names_in_force(b, a) == ["tag", "redact", "audit"]


def test_exec_hook_on_the_hot_read_path_is_refused_naming_the_hook() -> None:
    bad = chain("reads", [exec_hook("ok"), exec_hook("rerank", events=["post_recall"])])
    problem = validate_chains([bad])["reads"]
    assert problem is not None
    assert "'rerank'" in problem and "post_recall" in problem
    assert check_hooks(bad.spec.hooks) == problem
    assert "mode: Daemon" in problem and "allowExecOnHotPath: true" in problem  # CRD words
    assert "allow_exec_on_hot_path" not in problem


def test_allow_exec_on_hot_path_lets_an_exec_hook_read() -> None:
    reads = chain("reads", [exec_hook("rerank", events=["post_recall"],
                                      allowExecOnHotPath=True)])
    assert validate_chains([reads]) == {"reads": None}
    entry = hook_entry(reads.spec.hooks[0])
    assert entry["allow_exec_on_hot_path"] is True
    assert parse_settings(render_hooks_file(reads.spec.hooks)).hooks[0].name == "rerank"
    assert "allow_exec_on_hot_path" not in hook_entry(chain("w", [exec_hook("t")]).spec.hooks[0])


def test_invalid_chain_keeps_its_accepted_hooks_in_force() -> None:
    accepted = [daemon_hook("rerank")]
    bad = chain("reads", [exec_hook("rerank", events=["post_recall"])], accepted=accepted)
    other = chain("writes", [exec_hook("tag")])
    assert validate_chains([bad, other])["reads"] is not None
    in_force = hooks_in_force([bad, other])
    assert [h.name for h in in_force] == ["rerank", "tag"]
    assert in_force[0].mode == "Daemon"  # the accepted version, not the invalid spec


def test_invalid_chain_never_accepted_contributes_nothing() -> None:
    bad = chain("reads", [exec_hook("rerank", events=["post_recall"])])
    assert names_in_force(bad, chain("writes", [exec_hook("tag")])) == ["tag"]


def test_name_clash_decided_by_chain_name_order() -> None:
    first = chain("alpha", [exec_hook("tag")])
    second = chain("beta", [exec_hook("audit"), exec_hook("tag", command=["/other"])],
                   accepted=[exec_hook("audit")])
    verdicts = validate_chains([second, first])
    assert verdicts["alpha"] is None
    assert verdicts["beta"] is not None
    assert "'tag'" in verdicts["beta"] and "alpha" in verdicts["beta"]
    in_force = hooks_in_force([second, first])
    assert [h.name for h in in_force] == ["tag", "audit"]
    assert in_force[0].command == ["/hooks/tag", "--strict"]  # alpha's, not beta's


def test_clash_verdict_does_not_depend_on_listing_order() -> None:
    first = chain("alpha", [exec_hook("tag")])
    second = chain("beta", [exec_hook("tag")])
    assert validate_chains([first, second]) == validate_chains([second, first])


def test_own_problem_is_reported_before_a_clash() -> None:
    first = chain("alpha", [exec_hook("tag")])
    second = chain("beta", [exec_hook("tag"), exec_hook("rerank", events=["post_search"])])
    problem = validate_chains([first, second])["beta"]
    assert problem is not None and "'rerank'" in problem


def test_invalid_chain_does_not_claim_names() -> None:
    """An invalid chain's (unaccepted) spec does not take a name from a later valid chain."""
    bad = chain("alpha", [exec_hook("tag", events=["post_recall"])])
    good = chain("beta", [exec_hook("tag")])
    assert validate_chains([bad, good])["beta"] is None
    assert names_in_force(bad, good) == ["tag"]


def test_hooks_held_by_an_invalid_chain_still_own_their_names() -> None:
    """Accepted hooks of an invalid chain are in force, so they hold their names: a later
    chain reusing one is a clash (reported), never a valid chain silently shadowed."""
    held = chain("alpha", [exec_hook("audit", events=["post_recall"])],
                 accepted=[exec_hook("audit", command=["/hooks/old-audit"])])
    newer = chain("beta", [exec_hook("audit", command=["/hooks/new-audit"])])
    verdicts = validate_chains([held, newer])
    assert verdicts["alpha"] is not None
    assert verdicts["beta"] is not None
    assert "'audit'" in verdicts["beta"] and "alpha" in verdicts["beta"]
    in_force = hooks_in_force([held, newer])
    assert [(h.name, h.command) for h in in_force] == [("audit", ["/hooks/old-audit"])]
