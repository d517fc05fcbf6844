"""Writes settle their approval and storage cap in their own transaction (issue 20 items 1, 2,
4, 5, 6 and 9; ADR 0017), on a real server and PostgreSQL: a resubmission refused by a quota
keeps its approval; concurrent stores of one agent never pass the cap; every stored byte of a
memory counts; mixed concurrent writes never deadlock; the rate quota comes before any
lookup."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from aiohttp import web
from hack.support.served import serve
from hack.support.waiting import Pending, await_until

from attested_cortex.store.database import Database
from tests.recall.embedserver import EmbedServer
from tests.server.test_approvals_api import BODY, decide, hold, server
from tests.server.test_hooks_api import count_memories
from tests.server.test_pipeline import approval_settings
from tests.support.cortex import CortexClient, MakeCortex, Reply


def usage_of(dsn: str, agent: str) -> int:
    """The agent's counted bytes (memories and transcripts), as the quota step reads them."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT memories + transcripts FROM agent_usage WHERE agent = %s",
                           (agent,)).fetchone()
    return int(row[0]) if row is not None else 0


async def resubmit(client: CortexClient, approval: str) -> Reply:
    return await client.call("POST", "/v1/memories", BODY,
                             headers={"X-Cortex-Approval": approval})


async def until_not(status: int, attempt: Any, *, seconds: float = 10) -> Reply:
    """``attempt()`` again until its answer is not ``status`` (bounded)."""
    async def answered() -> Reply | Pending:
        reply: Reply = await attempt()
        return Pending(reply.text) if reply.status == status else reply

    return await await_until(answered, what=f"an answer other than {status}", seconds=seconds)


async def test_a_resubmission_refused_by_the_rate_quota_keeps_its_approval(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    assert (await decide(client, approval)).status == 200
    limited = await make_cortex(migrated_pg15_dsn, migrated=False,
                                quotas={"requests_per_second": 1}, **approval_settings(tmp_path))
    await until_not(200, lambda: limited.call("GET", "/v1/capabilities"))  # bucket empty
    refused = await resubmit(limited, approval)
    assert refused.status == 429, refused.text
    done = await until_not(429, lambda: resubmit(limited, approval))
    assert done.status == 201, done.text  # a2502ee: 409 approval_not_usable, already used
    assert count_memories(migrated_pg15_dsn) == 1


async def test_a_resubmission_refused_by_the_storage_cap_keeps_its_approval(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"enabled": False, "storage_per_agent_bytes": 100},
                               **approval_settings(tmp_path))
    approval = await hold(client)
    assert (await decide(client, approval)).status == 200
    filler = await client.store("n", "f" * 90)  # with the held 17 bytes: 108
    refused = await resubmit(client, approval)
    assert refused.status == 413 and refused.body["error"]["code"] == "storage_quota_exceeded"
    assert (await client.call("DELETE", f"/v1/memories/{filler['id']}")).status == 200
    done = await resubmit(client, approval)
    assert done.status == 201, done.text  # a2502ee: 409 approval_not_usable, already used
    again = await resubmit(client, approval)
    assert again.status == 409 and again.body["error"]["code"] == "approval_not_usable"


async def test_concurrent_stores_of_one_agent_never_pass_the_storage_cap(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    cap = 2000
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"enabled": False, "storage_per_agent_bytes": cap})
    # 100 counted bytes each: the namespace (1) and the content (99)
    replies = await asyncio.gather(*(
        client.call("POST", "/v1/memories", {"namespace": "n", "content": f"{i:02d}" + "c" * 97})
        for i in range(40)))
    statuses = sorted(r.status for r in replies)
    assert set(statuses) == {201, 413}, statuses
    assert usage_of(migrated_pg15_dsn, "dev:tester") <= cap  # a2502ee: 12.8x the cap
    assert statuses.count(201) == cap // 100 == count_memories(migrated_pg15_dsn)


async def test_every_stored_byte_of_a_memory_counts(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False)
    tags = [f"{i:02d}" + "\u00e9" * 31 for i in range(16)]  # 64 bytes each
    await client.store("ns", "body", tags=tags)
    assert usage_of(migrated_pg15_dsn, "dev:tester") == 2 + 4 + 16 * 64  # a2502ee: 6
    await client.store("ns", "x", title="t", metadata={"k": 1})
    # namespace, content, title, the metadata's stored text; an empty metadata counts 0
    assert usage_of(migrated_pg15_dsn, "dev:tester") == 1030 + 2 + 1 + 1 + len('{"k": 1}')


TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "support/**",
                                               "retention_days": 1}]}


async def test_mixed_concurrent_writes_never_deadlock(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS)
    agents = [f"dev:w{i}" for i in range(4)]

    async def writer(n: int) -> list[int]:
        agent, statuses = agents[n % len(agents)], []
        for i in range(8):
            reply = await client.call("POST", "/v1/memories",
                                      {"namespace": "mix", "content": f"{n}-{i}"}, agent=agent)
            statuses.append(reply.status)
            if i % 4 == 3:
                statuses.append((await client.call("POST", "/v1/transcripts", {
                    "namespace": "support/mix", "content": f"user: {n}-{i}"}, agent=agent)).status)
            if reply.status != 201:
                continue
            path = f"/v1/memories/{reply.body['id']}"
            change = (client.call("PATCH", path, {"content": f"{n}-{i} changed"}, agent=agent)
                      if i % 2 else client.call("DELETE", path, agent=agent))
            statuses.append((await change).status)
        return statuses

    results = await asyncio.gather(*(writer(n) for n in range(20)))
    statuses = [s for one in results for s in one]
    assert set(statuses) <= {200, 201}, sorted(statuses)  # a2502ee: 409 deadlock detected
    assert len(statuses) == 20 * (16 + 2)


async def test_the_rate_quota_comes_before_any_lookup(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"requests_per_second": 5})
    replies = await asyncio.gather(*(client.call("GET", f"/v1/memories/{uuid.uuid4()}")
                                     for _ in range(30)))
    statuses = {r.status for r in replies}
    assert statuses == {404, 429}, statuses  # a2502ee: 30 x 404, the lookup came first
    replay = await until_not(404, lambda: client.call(
        "GET", f"/v1/memories/{uuid.uuid4()}/replay"))
    assert replay.status == 429
    # nor is a body read or parsed first: a malformed one past the quota is 429, not 400
    await until_not(200, lambda: client.call("GET", "/v1/capabilities"))
    malformed = await client.call("POST", "/v1/memories", raw=b"{not json")
    assert malformed.status == 429, malformed.text  # a2502ee: 400, parsed before the quota


async def test_a_vector_pgvector_cannot_keep_is_refused_before_anything_is_written(
    age_database: Database, make_cortex: MakeCortex, tmp_path: Path,
) -> None:
    client = await make_cortex(age_database.dsn, embedder="client",
                               embedding={"model": "client-test", "dimension": 4},
                               **approval_settings(tmp_path))
    replies = [await client.call("POST", "/v1/memories", {
        "namespace": namespace, "content": "x", "embedding": vector})
        for vector in ([1e39, 0.1, 0.1, 0.1], [1e-46, 0.0, 0.0, 0.0])
        for namespace in ("kb", "held/x", "kb")]
    assert count_memories(age_database.dsn) == 0  # a2502ee: 400 after the memory committed
    assert {r.status for r in replies} == {400}
    assert {r.body["error"]["details"]["field"] for r in replies} == {"embedding"}
    stored = await client.store("kb", "y", embedding=[3e38, 0.1, 0.1, 0.1])
    assert stored["id"]


def lock_waiters(dsn: str) -> list[int]:
    """Backends of this database waiting on a lock (the blocked write)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'").fetchall()
    return [int(r[0]) for r in rows]


async def test_a_crash_during_the_completing_write_keeps_the_approval(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    client = await server(make_cortex, migrated_pg15_dsn, tmp_path)
    approval = await hold(client)
    assert (await decide(client, approval)).status == 200
    settings = approval_settings(tmp_path)
    config = tmp_path / "serve.yaml"
    config.write_text(json.dumps(settings, default=str))
    with psycopg.connect(migrated_pg15_dsn) as blocker:  # holds the author's usage row
        blocker.execute("INSERT INTO agent_usage (agent) VALUES ('dev:tester') "
                        "ON CONFLICT DO NOTHING")
        blocker.execute("SELECT 1 FROM agent_usage WHERE agent = 'dev:tester' FOR UPDATE")
        with serve(migrated_pg15_dsn, tmp_path, "--auth", "dev", "--config",
                   str(config)) as served, contextlib.suppress(aiohttp.ClientError):
            async with aiohttp.ClientSession() as http:

                async def post() -> int:
                    async with http.post(served.base + "/v1/memories", json=BODY, headers={
                            "X-Agent-Id": "dev:tester", "X-Cortex-Approval": approval}) as r:
                        return r.status

                sent = asyncio.create_task(post())
                waiting = await await_until(  # within the server's 5 s lock_timeout
                    lambda: lock_waiters(migrated_pg15_dsn), what="the write to reach the row",
                    seconds=4, interval_s=0.02)
                served.process.kill()  # the server dies mid-write, and so does its session
                with psycopg.connect(migrated_pg15_dsn, autocommit=True) as admin:
                    for pid in waiting:
                        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                await asyncio.gather(sent, return_exceptions=True)
        blocker.rollback()
    done = await resubmit(client, approval)
    assert done.status == 201, done.text  # a2502ee: 409, spent before the write that died
    assert count_memories(migrated_pg15_dsn) == 1


@dataclass
class Poisoned(EmbedServer):
    """An endpoint whose vector of a text with "poison" is finite JSON but not a float4."""

    def vector(self, text: str) -> list[float]:
        found = super().vector(text)
        return [1e39, *found[1:]] if "poison" in text else found


async def test_an_embedder_vector_that_cannot_be_stored_never_fails_a_committed_write(
    age_database: Database, make_cortex: MakeCortex, tmp_path: Path,
) -> None:
    endpoint = Poisoned()
    app = web.Application()
    app.router.add_post("/v1/embeddings", endpoint.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = await make_cortex(age_database.dsn, embedder=f"http://127.0.0.1:{port}/v1",
                                   embedding={"write_queue": 0}, **approval_settings(tmp_path))
        poisoned = {"namespace": "held/x", "content": "a poison pill"}
        approval = await hold(client, poisoned)
        assert (await decide(client, approval)).status == 200
        replies = [await client.call("POST", "/v1/memories", poisoned,
                                     headers={"X-Cortex-Approval": approval})
                   for _ in range(3)]
        assert [r.status for r in replies] == [201, 409, 409], [r.text for r in replies]
        assert count_memories(age_database.dsn) == 1  # a2502ee: 400 x 3 and 3 memories
    finally:
        await runner.cleanup()
