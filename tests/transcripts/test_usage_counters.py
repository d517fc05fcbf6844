"""The per-agent stored-bytes counters (``agent_usage``, migration 0009) against the rows they
count, on a real server and database: after a random mix of memory stores, growing and
shrinking updates, deletes, transcript stores, archives and prunes (the sweeper's injected
clock), and concurrent stores of one agent, every agent's counter equals the sum recomputed
from the rows with the pre-0009 expressions; the deep audit names a counter edited behind the
server (``usage``/``miscounted``), in HTTP and in ``cortexctl audit verify --deep``."""

from __future__ import annotations

import asyncio
import random
import subprocess
from datetime import datetime, timedelta
from typing import Any

import psycopg
from hack.support.served import CORTEXCTL
from psycopg.types.json import Jsonb

from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import DIALOGUE, row, store_transcript

POLICY = {"enabled": True, "prune_after_days": 7, "sweep_interval_seconds": 86400,
          "namespaces": [{"namespace": "support/**", "retention_days": 1}]}
AGENTS = ("dev:ada", "dev:bob", "dev:cy")
#: What the storage quota counts (0010: namespace, title, content, each tag, non-empty
#: metadata), summed from the rows (independent of the SQL functions the triggers share with
#: the recount).
RECOUNT = (
    "SELECT a.agent, "
    "(SELECT coalesce(sum(octet_length(namespace) + octet_length(content) "
    " + octet_length(title) + coalesce((SELECT sum(octet_length(t)) FROM unnest(tags) t), 0)"
    " + CASE WHEN metadata = '{}' THEN 0 ELSE octet_length(metadata::text) END), 0)"
    " FROM memories WHERE author = a.agent AND deleted_at IS NULL), "
    "(SELECT coalesce(sum(stored_bytes + octet_length(metadata::text)) "
    " FILTER (WHERE pruned_at IS NULL), 0) FROM transcripts WHERE owner = a.agent) "
    "FROM unnest(%s::text[]) AS a(agent)")


def recounted(dsn: str) -> dict[str, dict[str, int]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(RECOUNT, (list(AGENTS),)).fetchall()
    # no spoke-memory rows here: their counter (migration 0032) stays 0
    return {agent: {"memories": int(m), "transcripts": int(t), "spoke": 0}
            for agent, m, t in rows}


async def counted(client: CortexClient) -> dict[str, dict[str, int]]:
    answer = {}
    for agent in AGENTS:
        reply = await client.call("GET", "/v1/capabilities", agent=agent)
        you = reply.body["quotas"]["you"]
        assert you["stored_bytes"] == sum(you["stored_bytes_by_kind"].values())
        answer[agent] = dict(you["stored_bytes_by_kind"])
    return answer


def words(rng: random.Random, most: int) -> str:
    return " ".join(rng.choice(["ß", "note", "deploy", "日本", "x"])
                    for _ in range(rng.randint(0, most)))


async def test_counters_equal_the_recount_after_a_random_mix_of_writes(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               quotas={"enabled": False})
    rng = random.Random(20261130)
    live: dict[str, list[str]] = {agent: [] for agent in AGENTS}
    first: datetime | None = None
    for step in range(120):
        agent = rng.choice(AGENTS)
        action = rng.choice(["store", "store", "grow", "shrink", "delete", "transcript"])
        mine = live[agent]
        if action == "store" or (action in {"grow", "shrink", "delete"} and not mine):
            reply = await client.call("POST", "/v1/memories", {
                "namespace": "team/notes", "content": words(rng, 40) or "x",
                "title": words(rng, 5), "metadata": {"n": step, "w": words(rng, 8)}},
                agent=agent)
            assert reply.status == 201, reply.text
            mine.append(reply.body["id"])
        elif action in {"grow", "shrink"}:
            size = 200 if action == "grow" else 2
            reply = await client.call("PATCH", f"/v1/memories/{rng.choice(mine)}", {
                "content": words(rng, size) or "y", "title": words(rng, size // 20),
                "metadata": {"w": words(rng, size // 10)}}, agent=agent)
            assert reply.status == 200, reply.text
        elif action == "delete":
            gone = mine.pop(rng.randrange(len(mine)))
            reply = await client.call("DELETE", f"/v1/memories/{gone}", agent=agent)
            assert reply.status == 200, reply.text
        else:
            reply = await client.call("POST", "/v1/transcripts", {
                "namespace": "support/acme", "content": DIALOGUE * rng.randint(1, 4),
                "metadata": {"w": words(rng, 6)}}, agent=agent)
            assert reply.status == 201, reply.text
            if first is None:
                (first,) = row(client.dsn, "SELECT created_at FROM transcripts "
                               "WHERE id = %s", reply.body["id"])
        if step % 30 == 29:
            assert await counted(client) == recounted(client.dsn)

    assert first is not None
    sweeper = client.services.transcripts
    sweeper.clock = lambda: first + timedelta(days=2)
    assert (await sweeper.sweep()).archived > 0
    assert await counted(client) == recounted(client.dsn)  # archived frames still count
    oldest = "(SELECT id FROM transcripts ORDER BY created_at LIMIT 1)"
    with psycopg.connect(client.dsn) as conn:  # a metadata edit (no API does one) counts too
        (kept,) = conn.execute(f"SELECT metadata FROM transcripts WHERE id = {oldest}")\
            .fetchone() or (None,)
        conn.execute("UPDATE transcripts SET metadata = '{\"k\": \"a longer value\"}' "
                     f"WHERE id = {oldest}")
    assert await counted(client) == recounted(client.dsn)
    with psycopg.connect(client.dsn) as conn:  # put back: the sweeper skips a changed row
        conn.execute(f"UPDATE transcripts SET metadata = %s WHERE id = {oldest}",
                     (Jsonb(kept),))
    sweeper.clock = lambda: first + timedelta(days=10)
    assert (await sweeper.sweep()).pruned > 0
    after = await counted(client)
    assert after == recounted(client.dsn)
    assert all(kinds["transcripts"] == 0 for kinds in after.values())
    assert any(kinds["memories"] > 0 for kinds in after.values())


async def test_concurrent_stores_of_one_agent_lose_no_update(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               quotas={"enabled": False})

    async def one(i: int) -> Any:
        if i % 4 == 0:
            return await store_transcript(client, metadata={"i": i})
        reply = await client.call("POST", "/v1/memories", {
            "namespace": "team/notes", "content": "c" * (i + 1)}, agent="dev:ada")
        assert reply.status == 201, reply.text
        return reply.body

    await asyncio.gather(*(one(i) for i in range(40)))
    # the transcripts were stored, at the same time, as the default agent
    expected = recounted(client.dsn)
    assert expected["dev:ada"]["memories"] == sum(i + 1 + len("team/notes") for i in range(40)
                                                  if i % 4)
    assert (await counted(client))["dev:ada"] == expected["dev:ada"]
    reply = await client.call("GET", "/v1/capabilities")
    (owned,) = row(client.dsn, "SELECT sum(stored_bytes + octet_length(metadata::text)) "
                   "FROM transcripts")
    assert reply.body["quotas"]["you"]["stored_bytes_by_kind"]["transcripts"] == owned


async def test_the_deep_audit_names_a_counter_edited_behind_the_server(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY)
    await store_transcript(client)
    reply = await client.call("POST", "/v1/memories",
                              {"namespace": "team/notes", "content": "hello"}, agent="dev:ada")
    assert reply.status == 201, reply.text
    clean = (await client.call("GET", "/v1/audit/verify?deep=true")).body["deep"]
    assert clean["ok"] and clean["agents"] == 2, clean

    with psycopg.connect(client.dsn) as conn:
        conn.execute("UPDATE agent_usage SET memories = 0 WHERE agent = 'dev:ada'")
        conn.execute("DELETE FROM agent_usage WHERE agent = 'dev:tester'")
    report = (await client.call("GET", "/v1/audit/verify?deep=true")).body["deep"]
    assert not report["ok"]
    found = {(m["kind"], m["id"], m["problem"], tuple(m["fields"]))
             for m in report["mismatches"]}
    assert found == {("usage", "dev:ada", "miscounted", ("memories",)),
                     ("usage", "dev:tester", "miscounted", ("transcripts",))}
    cli = await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", client.dsn, "--deep"],
        capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "usage dev:ada: miscounted (memories)" in cli.stdout
