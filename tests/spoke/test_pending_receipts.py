"""Pending receipts and the OpenAI-compatible reflection engine (ADR 0069), against a real
local HTTP server that speaks the chat-completions shape: generation answers ``pending``,
the background worker commits it (the reflection over the pinned basis, its cost on the
receipt) or fails it (an endpoint that hangs past the bound, one that errors, a basis that
moved); two workers never run one job (SKIP LOCKED); and a server killed with SIGKILL in the
middle of a job leaves it to the next server, which resolves it once."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest
import yaml
from aiohttp import web
from hack.support.served import serve
from hack.support.waiting import await_until

from attested_cortex.embedding.chat import ChatClient
from attested_cortex.server.tokens import generate
from attested_cortex.service.resources.spoke.reflections import reflection_job
from attested_cortex.service.workers.pending_receipts import PendingReceipts, Reflector
from attested_cortex.store.migrating import migrate
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, REFLECTING, ok, seeded, space_bundle
from tests.support.cortex import MakeCortex
from tests.support.postgres import Database

TRANSFER = "spoke-memory, spoke-memory-transfer"
API_KEY = "sk-test-never-logged-7f3a"
SUBJECT = {"space_id": "kb", "subject_id": "u1"}


@dataclass
class Endpoint:
    """A real OpenAI-compatible chat-completions server: ``mode`` answers, holds the
    request until ``release`` is set (``gate``), never answers (``hang``) or errors."""

    url: str = ""
    mode: str = "answer"
    calls: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(body)
        self.headers.append(dict(request.headers))
        self.arrived.set()
        if self.mode == "error":
            return web.json_response({"error": {"message": "overloaded"}}, status=500)
        if self.mode == "hang":
            await asyncio.Event().wait()
        if self.mode == "gate":
            await self.release.wait()
        notes = body["messages"][-1]["content"]
        return web.json_response({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": f"Reflected on {notes.count('Note:')} notes."}}],
            "usage": {"prompt_tokens": len(notes) // 4, "completion_tokens": 5,
                      "total_tokens": len(notes) // 4 + 5}})


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    found = Endpoint()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", found.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    found.url = f"http://127.0.0.1:{port}/v1"
    yield found
    found.release.set()
    await runner.cleanup()


def reflection_settings(endpoint: Endpoint, tmp_path: Path, **more: Any) -> dict[str, Any]:
    key = tmp_path / "reflection-key"
    key.write_text(API_KEY + "\n")
    return {"reflection": {"endpoint": endpoint.url, "model": "tiny-test",
                           "api_key_file": str(key), "timeout_ms": 400, **more},
            "pending_poll_ms": 50}


@pytest.fixture
async def team(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
               endpoint: Endpoint) -> Agents:
    return await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        spoke_memory=reflection_settings(endpoint, tmp_path))


async def generate_reflection(team: Agents, key: str | None = None) -> dict[str, Any]:
    receipt: dict[str, Any] = await ok(team, "owner", "memory.reflections.generate", SUBJECT,
                                       flags=REFLECTING, key=key)
    return receipt


async def settled(team: Agents, receipt: dict[str, Any]) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        found: dict[str, Any] = await ok(team, "owner", "memory.receipts.get", {
            "space_id": "kb", "receipt_id": receipt["receipt_id"]})
        return found if found["status"] != "pending" else None
    return await await_until(done, seconds=20, what="the pending receipt to settle")


async def pending_count(team: Agents) -> int:
    [space] = (await ok(team, "owner", "memory.spaces.list", {}))["spaces"]
    return int(space["pending_receipts"])


async def test_generation_answers_pending_then_the_worker_commits_it(
        team: Agents, endpoint: Endpoint, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await seeded(team)
    made = await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "Walks at dawn."}, "placement": {"context_id": "c1"}})
    endpoint.mode = "gate"
    receipt = await generate_reflection(team, key="r-1")
    assert receipt["status"] == "pending" and receipt["refs"] == []
    await asyncio.wait_for(endpoint.arrived.wait(), 10)
    assert await pending_count(team) == 1
    assert (await generate_reflection(team, key="r-1")) == receipt  # a retry: no second job
    endpoint.release.set()
    done = await settled(team, receipt)
    assert done["status"] == "committed" and done["error_code"] is None
    cost = done["extensions"]["cost"]
    assert cost["model"] == "tiny-test" and cost["usage"]["completion_tokens"] == 5
    assert await pending_count(team) == 0
    assert (await generate_reflection(team, key="r-1")) == done  # the key now answers this
    [reflection] = (await ok(team, "owner", "memory.reflections.list", SUBJECT,
                             flags=REFLECTING))["reflections"]
    state = await ok(team, "owner", "memory.reflections.state", SUBJECT, flags=REFLECTING)
    assert reflection["reflection_id"] == done["refs"][0]
    assert reflection["text"] == "Reflected on 1 notes."
    assert reflection["basis"]["engine_policy"] == "openai-compatible/tiny-test"
    assert reflection["basis"]["records"] == [{"record_id": made["refs"][0], "revision": 1}]
    assert reflection["state_digest"] == state["state_digest"] and not reflection["stale"]
    described = await ok(team, "owner", "memory.describe", {})
    assert described["engine_policy_version"] == "openai-compatible/tiny-test"
    [sent] = endpoint.calls
    assert sent["model"] == "tiny-test" and "Walks at dawn." in sent["messages"][-1]["content"]
    assert endpoint.headers[0]["Authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in caplog.text
    caps = (await team.call("owner", "GET", "/v1/capabilities")).body
    pending = caps["spoke_memory"]["pending"]
    assert pending["kinds"] == ["export", "reflection"] and pending["committed"] == 1
    assert pending["reflection_endpoint"] == endpoint.url.rsplit("/", 1)[0]


async def test_a_hanging_or_failing_endpoint_fails_the_receipt_and_a_moved_basis_too(
        team: Agents, endpoint: Endpoint) -> None:
    await seeded(team)
    made = await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "Walks at dawn."}, "placement": {"context_id": "c1"}})
    endpoint.mode = "hang"  # bounded by timeout_ms (400 ms)
    hung = await settled(team, await generate_reflection(team))
    assert (hung["status"], hung["error_code"]) == ("failed", "generator_timeout")
    assert "0.4 s" in hung["extensions"]["reason"]
    endpoint.mode = "error"
    failed = await settled(team, await generate_reflection(team))
    assert (failed["status"], failed["error_code"]) == ("failed", "generator_refused")
    assert failed["extensions"]["reason"] == "the reflection endpoint answered HTTP 500"
    # a job queued behind a busy worker whose basis moves before it runs fails, not lies
    endpoint.mode, endpoint.arrived = "gate", asyncio.Event()
    first = await generate_reflection(team)
    await asyncio.wait_for(endpoint.arrived.wait(), 10)
    second = await generate_reflection(team)
    await ok(team, "owner", "memory.records.update", {
        "space_id": "kb", "record_id": made["refs"][0], "expected_revision": 1,
        "content": {"text": "Walks at dusk."}})
    endpoint.release.set()
    assert (await settled(team, first))["status"] == "committed"
    moved = await settled(team, second)
    assert (moved["status"], moved["error_code"]) == ("failed", "basis_changed")
    assert await pending_count(team) == 0
    listed = (await ok(team, "owner", "memory.reflections.list", SUBJECT,
                       flags=REFLECTING))["reflections"]
    assert len(listed) == 1 and listed[0]["stale"]  # generated over revision 1


async def test_two_workers_never_run_one_job(team: Agents, endpoint: Endpoint) -> None:
    await seeded(team)
    await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "Walks at dawn."}, "placement": {"context_id": "c1"}})
    endpoint.mode = "gate"
    receipt = await generate_reflection(team)
    await asyncio.wait_for(endpoint.arrived.wait(), 10)  # the server's worker holds it
    reflector = Reflector(ChatClient(endpoint.url, model="tiny-test"), 5.0)
    other = PendingReceipts(team.client.services.db,
                            {"reflection": reflection_job(reflector)}, reflector=reflector)
    try:
        assert await other.run_once() is False  # skipped: locked by the first worker
    finally:
        await other.aclose()
    endpoint.release.set()
    assert (await settled(team, receipt))["status"] == "committed"
    assert len(endpoint.calls) == 1


async def test_an_export_over_the_bound_is_built_in_the_background(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER},
                        spoke_memory={"export_pending_records": 1, "pending_poll_ms": 50})
    await seeded(team)
    for text in ("one", "two"):
        await ok(team, "owner", "memory.records.create", {
            **SUBJECT, "content": {"text": text}, "placement": {"shared": True}})
    small = await ok(team, "owner", "memory.exports.create", {
        "space_id": "kb", "chunk_bytes": 1024}, flags=TRANSFER)
    assert small["status"] == "pending"  # two records: over the bound of one
    done = await settled(team, small)
    assert done["status"] == "committed" and done["revision"] == 1
    chunks: list[dict[str, Any]] = []
    while not chunks or not chunks[-1]["final"]:
        chunks.append(await ok(team, "owner", "memory.exports.get", {
            "space_id": "kb", "export_id": done["refs"][0], "ordinal": len(chunks)},
            flags=TRANSFER))
    records = space_bundle(chunks)["chunks/space_records-000000.jsonl"]
    assert [json.loads(line)["content"] for line in records.splitlines()] == [
        {"text": "one"}, {"text": "two"}]
    assert await pending_count(team) == 0


async def test_the_worker_runs_as_the_least_privilege_role(
        make_cortex: MakeCortex, any_database: Database, tmp_path: Path) -> None:
    await migrate(any_database.dsn, app_role="cortex_app")
    app_dsn = any_database.server.app_dsn(any_database.name)
    team = await agents(make_cortex, app_dsn, tmp_path, {"owner": OWNER},
                        spoke_memory={"export_pending_records": 0, "pending_poll_ms": 50})
    await seeded(team)
    await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "one"}, "placement": {"shared": True}})
    made = await ok(team, "owner", "memory.exports.create", {"space_id": "kb"},
                    flags=TRANSFER)
    assert made["status"] == "pending"
    assert (await settled(team, made))["status"] == "committed"


async def test_an_export_job_re_checks_the_exporters_grants_when_it_runs(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        endpoint: Endpoint) -> None:
    team = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "alice": ""},
                        spoke_memory={**reflection_settings(endpoint, tmp_path),
                                      "export_pending_records": 0})
    await seeded(team)
    await ok(team, "owner", "memory.records.create", {
        **SUBJECT, "content": {"text": "Walks at dawn."}, "placement": {"shared": True}})
    granted = await ok(team, "owner", "memory.grants.grant", {
        "space_id": "kb", "principal_id": "alice", "capabilities": [
            "transfer", "records_read"],  # an export shows only what alice reads (ADR 0082)
        "shared_access": True})
    endpoint.mode = "gate"  # the worker is busy with a reflection while the export waits
    reflection = await generate_reflection(team)
    await asyncio.wait_for(endpoint.arrived.wait(), 10)
    export = await ok(team, "alice", "memory.exports.create", {"space_id": "kb"},
                      flags=TRANSFER)
    assert export["status"] == "pending" and await pending_count(team) == 2
    await ok(team, "owner", "memory.grants.revoke", {"space_id": "kb",
                                                     "grant_id": granted["refs"][0]})
    endpoint.release.set()
    assert (await settled(team, reflection))["status"] == "committed"

    async def resolved() -> dict[str, Any] | None:
        found: dict[str, Any] = await ok(team, "alice", "memory.receipts.get", {
            "space_id": "kb", "receipt_id": export["receipt_id"]})
        return found if found["status"] != "pending" else None
    failed = await await_until(resolved, seconds=20, what="the export job to settle")
    assert (failed["status"], failed["error_code"], failed["refs"]) == (
        "failed", "grant_missing", [])
    assert await pending_count(team) == 0


async def test_a_server_killed_mid_job_leaves_it_to_the_next_server(
        migrated_pg15_dsn: str, tmp_path: Path, endpoint: Endpoint) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} owner {OWNER}\n")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"spoke_memory": reflection_settings(
        endpoint, tmp_path, timeout_ms=60_000)}))
    flags = ("--auth", "tokens", "--tokens-file", str(tmp_path / "tokens"),
             "--graph-backend", "CTE", "--config", str(config))
    headers = {"Authorization": f"Bearer {token}", "X-Spoke-Capabilities": REFLECTING}

    async def call(session: aiohttp.ClientSession, base: str, name: str,
                   request: dict[str, Any]) -> dict[str, Any]:
        async with session.post(f"{base}/v1/spoke/memory", json={
                "op": name, "request": request}, headers=headers) as reply:
            found: dict[str, Any] = await reply.json()
            assert reply.status == 200, found
            return found

    endpoint.mode = "gate"  # the first server's call never returns
    async with aiohttp.ClientSession() as session:
        with serve(migrated_pg15_dsn, tmp_path, *flags) as first:
            await call(session, first.base, "memory.subjects.ensure", SUBJECT)
            await call(session, first.base, "memory.records.create", {
                **SUBJECT, "content": {"text": "Walks at dawn."}, "placement": {"shared": True}})
            receipt = await call(session, first.base, "memory.reflections.generate", SUBJECT)
            assert receipt["status"] == "pending"
            await asyncio.wait_for(endpoint.arrived.wait(), 20)
            first.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.process.wait)
        endpoint.mode = "answer"
        with serve(migrated_pg15_dsn, tmp_path, *flags) as second:
            async def done() -> dict[str, Any] | None:
                found = await call(session, second.base, "memory.receipts.get", {
                    "space_id": "kb", "receipt_id": receipt["receipt_id"]})
                return found if found["status"] != "pending" else None
            settled_ = await await_until(done, seconds=30, what="the receipt to settle")
    assert settled_["status"] == "committed" and len(endpoint.calls) == 2
    with psycopg.connect(migrated_pg15_dsn) as conn:
        reflections = conn.execute("SELECT reflection_id::text FROM memory_reflections"
                                   ).fetchall()
        work = conn.execute("SELECT count(*) FROM memory_pending_work").fetchone()
    assert reflections == [(settled_["refs"][0],)] and work == (0,)
