"""Hot reload: file edits and ConfigMap-style symlink swaps, invalid files, fires in flight."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hack.support.waiting import await_until
from prometheus_client import CollectorRegistry

from attested_cortex.hooks import HookConfigError, HookPipeline, open_pipeline
from tests.hooks.conftest import alive, hook, metric
from tests.hooks.test_remote_connect import unaccepting  # noqa: F401 - a fixture

pytestmark = pytest.mark.spawns  # the watched configurations start daemon hooks

DENY = {"answer": {"decision": "deny", "reason": "v2"}}


def config(*hooks: dict[str, Any]) -> str:
    return json.dumps({"version": 1, "hooks": list(hooks)})


@pytest.fixture
async def watched(tmp_path: Path, registry: CollectorRegistry) -> Any:
    opened: list[HookPipeline] = []

    async def open_(path: Path) -> HookPipeline:
        pipeline = await open_pipeline(path, registry=registry, watch_interval_s=0.02)
        opened.append(pipeline)
        return pipeline

    yield open_
    for pipeline in opened:
        await pipeline.aclose()


async def test_absent_file_means_no_hooks_then_appears(tmp_path: Path, watched: Any) -> None:
    path = tmp_path / "hooks.yaml"
    pipeline = await watched(path)
    assert pipeline.describe()["by_event"] == {}
    path.write_text(config(hook("guard", ["pre_store"], behave=DENY)))
    await await_until(lambda: pipeline.describe()["config"]["generation"] == 2, seconds=10)
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny"


async def test_invalid_file_at_startup_is_an_error(tmp_path: Path,
                                                   registry: CollectorRegistry) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text("hooks: [{name: x, events: [pre_nothing], command: [true]}]")
    with pytest.raises(HookConfigError, match="pre_nothing"):
        await open_pipeline(path, registry=registry)


async def test_invalid_new_file_keeps_old_config(
    tmp_path: Path, watched: Any, registry: CollectorRegistry
) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text(config(hook("guard", ["pre_store"], behave=DENY)))
    pipeline = await watched(path)
    path.write_text(config(hook("guard", ["pre_store"], timeout_ms=999_999)))
    await await_until(lambda: not pipeline.describe()["config"]["valid"], seconds=10)
    described = pipeline.describe()["config"]
    assert "guard" in (described["last_error"] or "") and described["generation"] == 1
    assert metric(registry, "cortex_hook_config_reloads_total", result="error") == 1
    assert metric(registry, "cortex_hook_config_valid") == 0
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny"
    path.write_text(config())
    await await_until(lambda: pipeline.describe()["config"]["valid"], seconds=10)
    assert pipeline.describe()["by_event"] == {}


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfehooks: []", "not UTF-8"),
    (b"[" * 3000 + b"]" * 3000, "nests too deeply"),
])
async def test_a_new_file_no_parser_can_read_is_reported(
    tmp_path: Path, watched: Any, registry: CollectorRegistry, content: bytes, message: str,
) -> None:
    # Before: the watcher's loop logged the exception and went on, while describe() still
    # said the configuration was valid and no reload error was counted.
    path = tmp_path / "hooks.yaml"
    path.write_text(config(hook("guard", ["pre_store"], behave=DENY)))
    pipeline = await watched(path)
    path.write_bytes(content)
    await await_until(lambda: not pipeline.describe()["config"]["valid"], seconds=10)
    assert message in (pipeline.describe()["config"]["last_error"] or "")
    assert metric(registry, "cortex_hook_config_reloads_total", result="error") == 1
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny"


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfehooks: []", "not UTF-8"),
    (b"[" * 3000 + b"]" * 3000, "nests too deeply"),
])
async def test_a_file_no_parser_can_read_at_startup_is_a_config_error(
    tmp_path: Path, registry: CollectorRegistry, content: bytes, message: str,
) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_bytes(content)
    with pytest.raises(HookConfigError, match=message):
        await open_pipeline(path, registry=registry)


async def test_a_shutdown_during_a_reload_stops_the_new_daemons(
    tmp_path: Path, registry: CollectorRegistry, unaccepting: int,  # noqa: F811
) -> None:
    # Before: the watcher, cancelled while the new generation waited for its remote hook to
    # connect, dropped that generation with its daemon running: the child outlived aclose().
    path = tmp_path / "hooks.yaml"
    path.write_text(config())
    pipeline = await open_pipeline(path, registry=registry, watch_interval_s=0.02)
    pid_file = tmp_path / "daemon.pid"
    writes_pid = ["python3", "-c", "import os, sys, time\n"
                  f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                  "sys.stdin.read()"]
    path.write_text(config(
        {"name": "local", "events": ["pre_store"], "mode": "daemon", "command": writes_pid},
        {"name": "far", "events": ["post_store"], "mode": "remote",
         "address": f"tcp://127.0.0.1:{unaccepting}"}))
    await await_until(lambda: pid_file.exists() and pid_file.read_text() != "", seconds=10)
    pid = int(pid_file.read_text())
    assert pipeline.describe()["config"]["generation"] == 1  # still connecting the remote
    await pipeline.aclose()
    await await_until(lambda: not alive(pid), seconds=5)


async def test_configmap_symlink_swap(tmp_path: Path, watched: Any) -> None:
    # The kubelet layout: hooks.yaml -> ..data/hooks.yaml, ..data -> ..<timestamp> (swapped).
    mount = tmp_path / "mount"
    mount.mkdir()
    first, second = mount / "..2026_01", mount / "..2026_02"
    first.mkdir()
    second.mkdir()
    (first / "hooks.yaml").write_text(config())
    (second / "hooks.yaml").write_text(config(hook("guard", ["pre_store"], behave=DENY)))
    (mount / "..data").symlink_to(first.name)
    (mount / "hooks.yaml").symlink_to("..data/hooks.yaml")
    pipeline = await watched(mount / "hooks.yaml")
    (mount / "..data_tmp").symlink_to(second.name)
    os.replace(mount / "..data_tmp", mount / "..data")
    await await_until(lambda: "pre_store" in pipeline.describe()["by_event"], seconds=10)
    result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert result.decision == "deny"


async def test_in_flight_fire_finishes_on_old_config(tmp_path: Path, watched: Any) -> None:
    path = tmp_path / "hooks.yaml"
    path.write_text(config(hook("old", ["pre_store"], mode="daemon")))
    pipeline = await watched(path)
    old_pid = pipeline.describe()["by_event"]["pre_store"][0]["pid"]
    slow = asyncio.create_task(pipeline.fire(
        "pre_store", {"behave": {"sleep": 0.5, "answer": {"decision": "deny", "reason": "v1"}}},
        agent_id="a", namespace="n",
    ))
    await await_until(lambda: pipeline.describe()["config"]["in_flight"] == 1, seconds=10)
    path.write_text(config(hook("new", ["pre_store"], mode="daemon", behave=DENY)))
    await await_until(lambda: pipeline.describe()["config"]["generation"] == 2, seconds=10)
    fresh = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    old = await slow
    assert (old.reason, old.records[0].name, old.records[0].failure) == ("v1", "old", None)
    assert (fresh.reason, fresh.records[0].name) == ("v2", "new")
    await await_until(lambda: old_pid is not None and not alive(old_pid), seconds=10)


async def test_reload_under_load_never_fails_a_fire(tmp_path: Path, watched: Any) -> None:
    path = tmp_path / "hooks.yaml"
    variants = [
        config(hook("a", ["post_recall"])),
        config(hook("b", ["post_recall"], behave={"answer": {"decision": "deny", "reason": "b"}})),
    ]
    path.write_text(variants[0])
    pipeline = await watched(path)
    results: list[Any] = []
    stop = asyncio.Event()

    async def load() -> None:
        while not stop.is_set():
            batch = [pipeline.fire("post_recall", {}, agent_id="x", namespace="n")
                     for _ in range(10)]
            results.extend(await asyncio.gather(*batch))

    workers = [asyncio.create_task(load()) for _ in range(3)]
    for generation in range(2, 6):
        path.write_text(variants[(generation + 1) % 2])
        await await_until(lambda g=generation: pipeline.describe()["config"]["generation"] == g,
                          seconds=10)
        served = len(results)
        await await_until(lambda n=served: len(results) >= n + 30, seconds=30)
    stop.set()
    await asyncio.gather(*workers)
    assert all(r.records and r.records[0].failure is None for r in results)
    assert {r.records[0].name for r in results} == {"a", "b"}
    assert all((r.decision == "deny") == (r.records[0].name == "b") for r in results)


async def test_no_config_path_means_no_hooks_and_a_serialisable_description(
    registry: CollectorRegistry,
) -> None:
    pipeline = await open_pipeline(None, registry=registry)
    try:
        described = pipeline.describe()
        assert described["by_event"] == {} and described["config"]["path"] is None
        assert json.loads(json.dumps(described)) == described
        result = await pipeline.fire("post_recall", {"results": []}, agent_id="a",
                                     namespace=None)
        assert result.decision == "allow" and result.records == ()
    finally:
        await pipeline.aclose()
