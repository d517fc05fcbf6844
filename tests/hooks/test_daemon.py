"""Daemon hooks: one long-lived child per hook, JSON-RPC over stdio, restarts, backpressure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
from hack.support.waiting import await_until
from prometheus_client import CollectorRegistry

from attested_cortex.hooks import HookPipeline
from attested_cortex.hooks.reporting import render_hooks
from tests.hooks.conftest import PipelineFactory, alive, hook, metric

pytestmark = pytest.mark.spawns  # daemon hooks: long-lived child processes


def daemon(name: str, events: list[str], **fields: object) -> dict[str, object]:
    return hook(name, events, mode="daemon", **fields)


def pid_of(pipeline: HookPipeline, event: str) -> int | None:
    return pipeline.describe()["by_event"][event][0]["pid"]


async def test_post_recall_defaults_to_daemon(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(hook("watch", ["post_recall"]))
    state = pipeline.describe()["by_event"]["post_recall"][0]
    assert (state["mode"], state["state"]) == ("daemon", "up")
    assert isinstance(state["pid"], int)


async def test_decisions_over_json_rpc(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store", "post_recall"]))
    deny = {"decision": "deny", "reason": "nope", "code": "x"}
    modify = {"decision": "modify", "delta": {"content": "new"}}
    denied = await pipeline.fire("pre_store", {"behave": {"answer": deny}}, agent_id="a",
                                 namespace="n")
    modified = await pipeline.fire("pre_store", {"behave": {"answer": modify}}, agent_id="a",
                                   namespace="n")
    allowed = await pipeline.fire("post_recall", {"results": []}, agent_id="a", namespace="n")
    assert (denied.decision, denied.code) == ("deny", "x")
    assert modified.payload["content"] == "new"
    assert allowed.decision == "allow" and allowed.records[0].failure is None


async def test_one_child_serves_every_fire(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["post_recall"]))
    first = pid_of(pipeline, "post_recall")
    for _ in range(5):
        await pipeline.fire("post_recall", {}, agent_id="a", namespace="n")
    assert pid_of(pipeline, "post_recall") == first


async def test_hundred_concurrent_fires(
    make_pipeline: PipelineFactory, registry: CollectorRegistry
) -> None:
    pipeline = await make_pipeline(daemon("d", ["post_recall"], max_in_flight=16))
    results = await asyncio.gather(*(
        pipeline.fire("post_recall", {"i": i}, agent_id="a", namespace="n") for i in range(100)
    ))
    assert all(r.decision == "allow" and r.records[0].failure is None for r in results)
    labels = {"hook": "d", "event": "post_recall"}
    assert metric(registry, "cortex_hook_fires_total", **labels) == 100


async def test_crash_restarts_with_backoff(
    make_pipeline: PipelineFactory, registry: CollectorRegistry
) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"]))
    first = pid_of(pipeline, "pre_store")
    crashed = await pipeline.fire("pre_store", {"behave": {"crash": True}}, agent_id="a",
                                  namespace="n")
    assert crashed.decision == "allow" and crashed.records[0].failure == "crash"
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["state"] == "up",
                      seconds=10)
    state = pipeline.describe()["by_event"]["pre_store"][0]
    assert state["restarts"] == 1 and state["pid"] != first
    assert "closed its output" in (state["last_error"] or "")
    assert metric(registry, "cortex_hook_daemon_restarts_total", hook="d") == 1
    later = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert later.records[0].failure is None


async def test_an_exit_is_a_crash_and_a_restart_though_a_grandchild_holds_stdout(
    make_pipeline: PipelineFactory, tmp_path: Path,
) -> None:
    # Before: the pending fire waited out its whole budget (timeout, not crash), and the
    # hook was never restarted: the supervisor waited on Process.wait, which waits for the
    # stdout the orphan holds for 300 s.
    pipeline = await make_pipeline(daemon("d", ["pre_store"], timeout_ms=3000))
    first = pid_of(pipeline, "pre_store")
    pid_file = tmp_path / "orphan.pid"
    try:
        exited = await pipeline.fire("pre_store", {"behave": {"orphan": str(pid_file)}},
                                     agent_id="a", namespace="n")
        assert exited.records[0].failure == "crash", exited.records[0]
        await await_until(lambda: pid_of(pipeline, "pre_store") not in (None, first), seconds=10)
        later = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
        assert later.records[0].failure is None
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


async def test_fires_during_backoff_follow_fail_mode(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(
        daemon("d", ["pre_store"], fail_mode="closed", command=["/bin/false"])
    )
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["restarts"] >= 3,
                      seconds=10)
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny"
    assert result.records[0].failure in ("unavailable", "crash")


async def test_garbage_on_stdout_fails_pending_and_restarts(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"]))
    result = await pipeline.fire("pre_store", {"behave": {"garbage": True}}, agent_id="a",
                                 namespace="n")
    assert result.records[0].failure == "malformed"
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["restarts"] == 1,
                      seconds=10)


async def test_a_reply_with_a_huge_integer_fails_only_its_own_call(
    make_pipeline: PipelineFactory,
) -> None:
    # Before: the line was taken for garbage, so the call beside it failed malformed too
    # and the daemon was restarted.
    pipeline = await make_pipeline(daemon("d", ["pre_store"]))
    huge = '{"decision": "modify", "delta": {"n": ' + "9" * 5000 + "}}"
    beside, hostile = await asyncio.gather(
        pipeline.fire("pre_store", {"behave": {"sleep": 0.3}}, agent_id="a", namespace="n"),
        pipeline.fire("pre_store", {"behave": {"raw_result": huge}}, agent_id="a",
                      namespace="n"))
    assert hostile.records[0].failure == "malformed"
    assert beside.records[0].failure is None, beside.records[0]
    assert pipeline.describe()["by_event"]["pre_store"][0]["restarts"] == 0


async def test_a_reply_whose_id_is_true_answers_no_call(make_pipeline: PipelineFactory) -> None:
    # Before: Python's True == 1, so the forged Deny answered the first call.
    pipeline = await make_pipeline(daemon("d", ["pre_store"]))
    forged = '{"decision": "deny", "reason": "forged"}'
    first = asyncio.create_task(pipeline.fire("pre_store", {"behave": {"sleep": 0.3}},
                                              agent_id="a", namespace="n"))
    await await_until(lambda: pipeline.describe()["config"]["in_flight"] == 1, seconds=10)
    await pipeline.fire("pre_store", {"behave": {"raw_result": forged, "reply_id": True}},
                        agent_id="a", namespace="n")
    result = await first
    assert result.decision == "allow" and result.reason is None
    assert result.records[0].failure == "malformed"


async def test_oversized_reply(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"], max_output_bytes=4096))
    result = await pipeline.fire("pre_store", {"behave": {"oversized": 100_000}}, agent_id="a",
                                 namespace="n")
    assert result.records[0].failure == "oversized"


async def test_slow_reply_is_cut_at_timeout_without_killing_others(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"], timeout_ms=1500))
    slow, fast = await asyncio.gather(
        pipeline.fire("pre_store", {"behave": {"sleep": 10}}, agent_id="a", namespace="n"),
        pipeline.fire("pre_store", {}, agent_id="a", namespace="n"),
    )
    assert slow.records[0].failure == "timeout"
    assert fast.records[0].failure is None
    assert pipeline.describe()["by_event"]["pre_store"][0]["restarts"] == 0


async def test_full_in_flight_queue_is_backpressure(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"], timeout_ms=400, max_in_flight=2))
    results = await asyncio.gather(*(
        pipeline.fire("pre_store", {"behave": {"sleep": 2}}, agent_id="a", namespace="n")
        for _ in range(3)
    ))
    causes = sorted(r.records[0].failure or "" for r in results)
    assert causes == ["overloaded", "timeout", "timeout"]


async def test_close_stops_the_child(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["pre_store"]))
    pid = pid_of(pipeline, "pre_store")
    await pipeline.aclose()
    assert pipeline.describe()["by_event"]["pre_store"][0]["state"] == "closed"
    assert pid is not None
    assert not alive(pid)


async def test_close_kills_a_child_that_ignores_its_closed_stdin(
    make_pipeline: PipelineFactory,
) -> None:
    # Before: the shutdown's second cancel (tasks.stop, after 0.5 s) landed in the grace
    # wait for the child's own exit and skipped the kill: the child outlived the server.
    deaf = [sys.executable, "-c", "import signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)"]
    pipeline = await make_pipeline(daemon("d", ["pre_store"], command=deaf))
    pid = pid_of(pipeline, "pre_store")
    assert pid is not None
    await pipeline.aclose()
    await await_until(lambda: not alive(pid), seconds=5)


async def test_doctor_rendering_lists_hooks_by_event(make_pipeline: PipelineFactory) -> None:
    pipeline = await make_pipeline(daemon("d", ["post_recall", "pre_store"], priority=3))
    text = render_hooks(pipeline.describe())
    assert "generation 1" in text and "valid" in text
    assert [line.split()[:3] for line in text.splitlines()[1:]] == [
        ["post_recall", "d", "daemon"], ["pre_store", "d", "daemon"]]
    assert "state=up restarts=0" in text


async def test_hung_daemon_is_restarted_after_consecutive_timeouts(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = await make_pipeline(
        daemon("d", ["pre_store"], timeout_ms=200, behave={"sleep": 30})
    )
    hung = pid_of(pipeline, "pre_store")
    for _ in range(3):
        result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
        assert result.records[0].failure == "timeout"
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["restarts"] == 1,
                      seconds=10)
    await await_until(lambda: hung is not None and not alive(hung), seconds=10)
    assert "hung" in (pipeline.describe()["by_event"]["pre_store"][0]["last_error"] or "")
