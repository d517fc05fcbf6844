"""Hooks fire from every real operation, through HTTP, with real hook processes.

The reference implementation built its hooks and never fired them; these tests prove each
event fires from its operation and that decisions (Allow, Modify, Deny, AskUser), deadlines,
fail modes and hot reload change what a client sees.
"""

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from hack.support.waiting import await_until

from attested_cortex.hooks.events import EVENTS
from tests.support.cortex import CortexClient, MakeCortex

RECORDER = str(Path(__file__).parent / "programs" / "recorder.py")
NOT_YET_WIRED = {"pre_approval", "post_approval"}
#: Fired by the spoke-memory family's writes (they need grants): tests/spoke/test_hooks_audit.py.
ELSEWHERE = {"pre_spoke_write", "post_spoke_write"}


def hooks_file(tmp_path: Path, *hooks: dict[str, Any], name: str = "hooks.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"version": 1, "hooks": list(hooks)}))
    return path


def recorder(tmp_path: Path, *, events: list[str], mode: str = "daemon",
             answer: dict[str, Any] | None = None, modify: str | None = None,
             **more: Any) -> dict[str, Any]:
    env = {"RECORD_FILE": str(tmp_path / "record.jsonl")}
    if answer is not None:
        env["RECORDER_ANSWER"] = json.dumps(answer)
    if modify is not None:
        env["RECORDER_MODIFY_CONTENT"] = modify
    return {"name": more.pop("name", "recorder"), "events": events, "mode": mode,
            "command": [sys.executable, RECORDER], "env": env, "timeout_ms": 1000,
            "allow_exec_on_hot_path": True, **more}


def recorded(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def count_memories(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memories").fetchone()
        assert row is not None
        return int(row[0])


async def test_every_event_fires_from_its_operation(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    events = sorted(set(EVENTS) - NOT_YET_WIRED - ELSEWHERE)
    path = hooks_file(tmp_path, recorder(tmp_path, events=events))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path,
                               graph_backend="CTE", transcripts={"enabled": True})
    trail = await client.call("POST", "/v1/transcripts", {"namespace": "proj", "content": "x"})
    assert trail.status == 201, trail.text
    a = await client.store("proj", "alpha memory")
    b = await client.store("proj", "beta memory")
    await client.call("PATCH", f"/v1/memories/{a['id']}", {"title": "t"})
    await client.call("POST", "/v1/recall", {"query": "alpha"})
    await client.call("GET", "/v1/memories?namespace=proj")
    link = (await client.call("POST", "/v1/links", {"src_id": a["id"], "dst_id": b["id"],
                                                    "relation": "related_to"})).body
    await client.call("POST", "/v1/kg/query", {"start_id": a["id"], "depth": 1})
    await client.call("POST", "/v1/kg/paths", {"src_id": a["id"], "dst_id": b["id"]})
    await client.call("GET", f"/v1/kg/timeline?memory_id={a['id']}")
    await client.call("POST", "/v1/kg/invalidate", {"link_id": link["id"]})
    await client.call("DELETE", f"/v1/memories/{b['id']}")
    seen = recorded(tmp_path)
    assert {r["event"] for r in seen} == set(events)
    assert all(r["agent_id"] == "dev:tester" for r in seen)
    store = next(r for r in seen if r["event"] == "pre_store")
    assert store["payload"]["content"] == "alpha memory" and store["namespace"] == "proj"


async def test_deny_is_403_and_writes_nothing(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = recorder(tmp_path, events=["pre_store"], mode="exec",
                    answer={"decision": "deny", "reason": "not here", "code": "policy_x"})
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook))
    reply = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert reply.status == 403
    assert reply.body["error"]["details"]["decision"] == "deny"
    assert reply.body["error"]["details"]["hook_code"] == "policy_x"
    assert reply.body["error"]["message"] == "not here"
    assert count_memories(migrated_pg15_dsn) == 0


async def test_modify_changes_what_is_stored(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = recorder(tmp_path, events=["pre_store"], mode="exec", modify="[redacted]")
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook))
    stored = await client.store("n", "password=hunter2")
    assert stored["content"] == "[redacted]"
    recall = await client.call("POST", "/v1/recall", {"query": "hunter2"})
    assert recall.body["results"] == []


async def test_reference_redaction_hook_masks_credentials(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = {"name": "redact", "events": ["pre_store"], "mode": "exec", "timeout_ms": 3000,
            "fail_mode": "closed",
            "command": [sys.executable, "-m", "attested_cortex.hooks.reference.redact"]}
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook))
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    stored = await client.store("n", f"aws key {key} in the runbook")
    assert key not in stored["content"] and "runbook" in stored["content"]


@pytest.mark.parametrize(("mode", "status"), [("advisory", 201), ("enforce", 403)])
async def test_ask_user_depends_on_permission_mode(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path, mode: str, status: int,
) -> None:
    hook = recorder(tmp_path, events=["pre_store"], mode="exec",
                    answer={"decision": "ask_user", "prompt": "store this?",
                            "options": ["yes", "no"], "default": "no"})
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook),
                               permissions={"mode": mode})
    reply = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert reply.status == status, reply.text
    if status == 403:
        assert reply.body["error"]["code"] == "approval_required"
        assert count_memories(migrated_pg15_dsn) == 0


async def test_slow_hook_is_cut_and_the_request_answered_within_the_class_deadline(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    slow = {"name": "slow", "events": ["pre_store"], "mode": "exec", "timeout_ms": 300,
            "command": [sys.executable, "-c", "import time; time.sleep(60)"]}
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, slow))
    started = time.monotonic()
    reply = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert reply.status == 201  # fail open: the timeout means Allow
    assert time.monotonic() - started < 5.0  # the write class deadline
    metrics = (await client.call("GET", "/metrics")).text
    assert 'cause="timeout"' in metrics


async def test_crash_under_fail_closed_denies(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crash = {"name": "crashy", "events": ["pre_store"], "mode": "exec", "timeout_ms": 2000,
             "fail_mode": "closed", "command": [sys.executable, "-c", "raise SystemExit(3)"]}
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, crash))
    reply = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert reply.status == 403 and count_memories(migrated_pg15_dsn) == 0


async def test_100_concurrent_recalls_through_a_daemon_post_recall_hook(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = recorder(tmp_path, events=["post_recall"])
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               hooks_file=hooks_file(tmp_path, hook))
    await client.store("n", "concurrency test memory")
    replies = await asyncio.gather(*(client.call("POST", "/v1/recall", {"query": "concurrency"})
                                     for _ in range(100)))
    assert all(r.status == 200 and len(r.body["results"]) == 1 for r in replies)
    assert len([r for r in recorded(tmp_path) if r["event"] == "post_recall"]) == 100


async def test_capabilities_list_live_hooks_and_hot_reload(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    path = hooks_file(tmp_path, recorder(tmp_path, events=["post_recall"], name="first"))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path)
    caps = (await client.call("GET", "/v1/capabilities")).body
    assert [h["name"] for h in caps["hooks"]["by_event"]["post_recall"]] == ["first"]
    deny = recorder(tmp_path, events=["pre_store"], mode="exec", name="second",
                    answer={"decision": "deny", "reason": "reloaded"})
    staged = hooks_file(tmp_path, deny, name="next.yaml")
    stop = asyncio.Event()

    async def recall_load() -> list[int]:
        statuses = []
        while not stop.is_set():
            statuses.append((await client.call("POST", "/v1/recall", {"query": "x"})).status)
        return statuses

    load = [asyncio.create_task(recall_load()) for _ in range(8)]
    staged.replace(path)  # an atomic swap, as Kubernetes does for ConfigMaps

    async def reloaded() -> bool:
        return "pre_store" in (await hooks_described(client))["by_event"]

    await await_until(reloaded, what="the swapped hooks file loaded", seconds=20)
    stop.set()
    statuses = [status for task in load for status in await task]
    assert statuses and set(statuses) == {200}  # no request failed across the reload
    reply = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert reply.status == 403 and reply.body["error"]["message"] == "reloaded"
    path.write_text("version: 1\nhooks: [{name: bad, events: [nope]}]\n")

    async def refused() -> bool:
        return (await hooks_described(client))["config"]["valid"] is False

    await await_until(refused, what="the invalid hooks file reported", seconds=20)
    caps = (await client.call("GET", "/v1/capabilities")).body
    assert "nope" in caps["hooks"]["config"]["last_error"]
    still = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"})
    assert still.status == 403  # the old configuration stays live


async def hooks_described(client: CortexClient) -> Any:
    """The hooks part of the server's capabilities."""
    return (await client.call("GET", "/v1/capabilities")).body["hooks"]
