"""Exec hooks through a real pipeline: each decision, chain order, every failure cause under
both fail modes, deadlines, and the process group being killed."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from hack.support.waiting import await_until

from tests.hooks.conftest import PipelineFactory, alive, hook, metric

pytestmark = pytest.mark.spawns  # hook executables run as child processes


async def test_no_hooks_allows_unchanged(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline()
    result = await pipeline.fire("pre_store", {"content": "x"}, agent_id="a", namespace="n")
    assert (result.decision, result.payload, result.records) == ("allow", {"content": "x"}, ())


async def test_unknown_event_is_a_programming_error(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline()
    with pytest.raises(ValueError, match="pre_bogus"):
        await pipeline.fire("pre_bogus", {}, agent_id="a", namespace=None)


async def test_allow(make_pipeline: PipelineFactory, registry: object) -> None:
    pipeline = await make_pipeline(hook("ok", ["pre_store"]))
    result = await pipeline.fire("pre_store", {"content": "x"}, agent_id="a", namespace="n")
    assert result.decision == "allow"
    assert [(r.name, r.answer, r.failure) for r in result.records] == [("ok", "allow", None)]
    assert metric(registry, "cortex_hook_fires_total", hook="ok", event="pre_store") == 1


async def test_deny_carries_reason_and_code(make_pipeline: PipelineFactory) -> None:
    answer = {"decision": "deny", "reason": "no secrets here", "code": "secret_found"}
    pipeline = await make_pipeline(hook("guard", ["pre_store"], behave={"answer": answer}))
    result = await pipeline.fire("pre_store", {"content": "x"}, agent_id="a", namespace="n")
    assert (result.decision, result.reason, result.code) == ("deny", "no secrets here",
                                                              "secret_found")
    assert result.decided_by == "guard"


async def test_modify_applies_merge_patch(make_pipeline: PipelineFactory) -> None:
    answer = {"decision": "modify", "delta": {"content": "clean", "metadata": {"k": None}}}
    pipeline = await make_pipeline(hook("fix", ["pre_store"], behave={"answer": answer}))
    payload = {"content": "dirty", "metadata": {"k": 1, "keep": 2}}
    result = await pipeline.fire("pre_store", payload, agent_id="a", namespace="n")
    assert result.decision == "allow" and result.modified
    assert result.payload == {"content": "clean", "metadata": {"keep": 2}}
    assert payload == {"content": "dirty", "metadata": {"k": 1, "keep": 2}}


async def test_modify_on_post_event_is_ignored_with_warning(
    make_pipeline: PipelineFactory,
) -> None:
    answer = {"decision": "modify", "delta": {"content": "changed"}}
    pipeline = await make_pipeline(hook("late", ["post_store"], behave={"answer": answer}))
    result = await pipeline.fire("post_store", {"content": "kept"}, agent_id="a", namespace="n")
    assert result.decision == "allow" and result.payload == {"content": "kept"}
    assert "ignored on post event" in result.warnings[0]


async def test_ask_user(make_pipeline: PipelineFactory) -> None:
    answer = {"decision": "ask_user", "prompt": "store this?", "options": ["yes", "no"],
              "default": "no"}
    pipeline = await make_pipeline(hook("ask", ["pre_delete"], behave={"answer": answer}))
    result = await pipeline.fire("pre_delete", {"id": "m1"}, agent_id="a", namespace="n")
    assert (result.decision, result.prompt, result.options, result.default) == (
        "ask_user", "store this?", ("yes", "no"), "no")


async def test_chain_runs_by_priority_and_later_hooks_see_modifications(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = await make_pipeline(
        hook("low", ["pre_store"], priority=1, behave={"append": True}),
        hook("high", ["pre_store"], priority=10, behave={"append": True}),
        hook("mid", ["pre_store"], priority=5, behave={"append": True}),
    )
    result = await pipeline.fire("pre_store", {"seen": []}, agent_id="a", namespace="n")
    assert result.payload == {"seen": ["high", "mid", "low"]}


async def test_first_deny_stops_the_chain(make_pipeline: PipelineFactory) -> None:
    deny = {"decision": "deny", "reason": "stop"}
    pipeline = await make_pipeline(
        hook("first", ["pre_link"], priority=3, behave={"append": True}),
        hook("denier", ["pre_link"], priority=2, behave={"answer": deny}),
        hook("never", ["pre_link"], priority=1, behave={"append": True}),
    )
    result = await pipeline.fire("pre_link", {"seen": []}, agent_id="a", namespace="n")
    assert result.decision == "deny" and result.code == "hook_denied"
    assert [r.name for r in result.records] == ["first", "denier"]


async def test_deny_beats_an_earlier_ask_user(make_pipeline: PipelineFactory) -> None:
    ask = {"decision": "ask_user", "prompt": "sure?"}
    deny = {"decision": "deny", "reason": "no"}
    pipeline = await make_pipeline(
        hook("asker", ["pre_update"], priority=2, behave={"answer": ask}),
        hook("denier", ["pre_update"], priority=1, behave={"answer": deny}),
    )
    result = await pipeline.fire("pre_update", {}, agent_id="a", namespace="n")
    assert result.decision == "deny" and result.decided_by == "denier"


async def test_namespace_filter(make_pipeline: PipelineFactory) -> None:
    deny = {"decision": "deny", "reason": "team-a only"}
    pipeline = await make_pipeline(
        hook("scoped", ["pre_store"], namespaces=["team-a/*"], behave={"answer": deny})
    )
    inside = await pipeline.fire("pre_store", {}, agent_id="a", namespace="team-a/x")
    outside = await pipeline.fire("pre_store", {}, agent_id="a", namespace="team-b/x")
    unscoped = await pipeline.fire("pre_store", {}, agent_id="a", namespace=None)
    assert (inside.decision, outside.decision, unscoped.decision) == ("deny", "allow", "allow")


FAILURES = [
    ({"crash": True}, "crash"),
    ({"garbage": True}, "malformed"),
    ({"empty": True}, "empty"),
    ({"oversized": 5000}, "oversized"),
    ({"answer": {"decision": "maybe"}}, "malformed"),
    ({"answer": {"decision": "deny"}}, "malformed"),
    ({"sleep": 30}, "timeout"),
]


def budget(cause: str) -> int:
    """Short for the timeout case; generous otherwise, so a slow machine is not a timeout."""
    return 300 if cause == "timeout" else 4000


@pytest.mark.parametrize(("behave", "cause"), FAILURES)
async def test_failure_under_fail_open_allows_with_warning(
    make_pipeline: PipelineFactory, registry: object, behave: dict[str, object], cause: str
) -> None:
    pipeline = await make_pipeline(
        hook("flaky", ["pre_store"], timeout_ms=budget(cause), max_output_bytes=1024,
             behave=behave)
    )
    result = await pipeline.fire("pre_store", {"content": "x"}, agent_id="a", namespace="n")
    assert result.decision == "allow" and result.payload == {"content": "x"}
    assert result.records[0].failure == cause
    assert "fail_mode open" in result.warnings[0]
    labels = {"hook": "flaky", "event": "pre_store"}
    assert metric(registry, "cortex_hook_failures_total", cause=cause, **labels) == 1


@pytest.mark.parametrize(("behave", "cause"), FAILURES)
async def test_failure_under_fail_closed_denies(
    make_pipeline: PipelineFactory, behave: dict[str, object], cause: str
) -> None:
    pipeline = await make_pipeline(hook(
        "strict", ["pre_store"], timeout_ms=budget(cause), max_output_bytes=1024,
        fail_mode="closed",
        behave=behave,
    ))
    result = await pipeline.fire("pre_store", {"content": "x"}, agent_id="a", namespace="n")
    assert (result.decision, result.code, result.decided_by) == ("deny", "hook_failed", "strict")
    assert cause in (result.reason or "")


async def test_payload_values_json_cannot_encode_are_sent_as_text(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = await make_pipeline(hook("echo", ["pre_store"], behave={"append": True}))
    when = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    result = await pipeline.fire("pre_store", {"at": when, "seen": []}, agent_id="a",
                                 namespace="n")
    assert result.records[0].failure is None and result.payload["seen"] == ["echo"]


async def test_missing_program_is_a_crash(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(
        {"name": "gone", "events": ["pre_store"], "command": ["/nonexistent/hook"]}
    )
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "allow" and result.records[0].failure == "crash"


#: Loads (no NUL), but no process can be started with it: a lone surrogate has no bytes.
UNSTARTABLE = ["tr\ud800ue"]


async def test_a_command_the_os_cannot_take_is_a_crash(make_pipeline: PipelineFactory) -> None:
    # Before: the spawn's ValueError came out of fire(): a 500 for every request it fired on.
    pipeline = await make_pipeline(
        {"name": "odd", "events": ["pre_store"], "command": UNSTARTABLE, "fail_mode": "closed"}
    )
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny" and result.records[0].failure == "crash"


async def test_a_daemon_the_os_cannot_start_is_down_and_retried(
    make_pipeline: PipelineFactory,
) -> None:
    # Before: the spawn's ValueError ended the supervisor: "starting" for ever, and every
    # fire waited its whole budget for a start that would never come.
    pipeline = await make_pipeline(
        {"name": "odd", "events": ["pre_store"], "mode": "daemon", "command": UNSTARTABLE}
    )
    state = pipeline.describe()["by_event"]["pre_store"][0]
    assert state["state"] in ("backoff", "starting") and "cannot start" in state["last_error"]
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["restarts"] >= 2,
                      seconds=10)
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.records[0].failure in ("unavailable", "crash")


async def test_class_deadline_bounds_the_whole_chain(make_pipeline: PipelineFactory) -> None:
    # index class: 1000 ms. Two hooks of 800 ms each cannot both have their full slice.
    pipeline = await make_pipeline(
        hook("slow1", ["pre_index"], priority=2, timeout_ms=800, behave={"sleep": 30}),
        hook("slow2", ["pre_index"], priority=1, timeout_ms=800, behave={"sleep": 30}),
        # sleeps too: with only the class's last ~100 ms left, a fast hook on an idle
        # machine could still answer in time, and the test would depend on the load
        hook("never", ["pre_index"], priority=0, timeout_ms=800, behave={"sleep": 30}),
    )
    started = time.monotonic()
    result = await pipeline.fire("pre_index", {}, agent_id="a", namespace="n")
    elapsed_ms = (time.monotonic() - started) * 1000
    assert [r.failure for r in result.records] == ["timeout", "timeout", "timeout"]
    assert result.records[1].latency_ms < 800  # got only what was left of the class
    assert elapsed_ms < 1000 + 500  # the chain answered inside its class deadline (+ reaping)


async def test_timeout_kills_the_whole_process_group(
    make_pipeline: PipelineFactory, tmp_path: Path
) -> None:
    pidfile = tmp_path / "grandchild.pid"
    pipeline = await make_pipeline(
        hook("hang", ["pre_store"], timeout_ms=3000, behave={"grandchild": str(pidfile)})
    )
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.records[0].failure == "timeout"
    grandchild = int(pidfile.read_text())
    await await_until(lambda: not alive(grandchild), seconds=10)
