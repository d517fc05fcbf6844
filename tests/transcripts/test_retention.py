"""The retention lifecycle with an injected clock, on a real server and database: a
transcript past its namespace's retention is archived (still replayable, no longer
citable), then pruned (its bytes gone, its citations saying so); capabilities count each
stage from the database."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import DIALOGUE, row, store_transcript

POLICY = {"enabled": True, "retention_days": 30, "prune_after_days": 7,
          "sweep_interval_seconds": 86400,  # the test drives every sweep itself
          "namespaces": [{"namespace": "scratch/**", "retention_days": 1},
                         {"namespace": "support/**"}]}


def at(client: CortexClient, moment: datetime) -> None:
    """Set the sweeper's clock."""
    client.services.transcripts.clock = lambda: moment


async def counts(client: CortexClient) -> dict[str, int]:
    reply = await client.call("GET", "/v1/capabilities")
    found: dict[str, int] = reply.body["transcripts"]["counts"]
    return found


async def replay(client: CortexClient, memory: dict[str, str]) -> Any:
    reply = await client.call("GET", f"/v1/memories/{memory['id']}/replay?full=true")
    assert reply.status == 200, reply.text
    return reply.body


async def test_archive_then_prune_and_replay_says_pruned(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY)
    kept = await store_transcript(client, "support/acme")
    brief = await store_transcript(client, "scratch/tmp")
    memory = await client.store("support/acme", "why staging failed", citations=[
        {"transcript_id": kept["id"], "start": 0, "end": 40},
        {"transcript_id": brief["id"], "start": 6, "end": 30}])
    (created,) = row(migrated_pg15_dsn, "SELECT created_at FROM transcripts WHERE id = %s",
                     kept["id"])
    sweeper = client.services.transcripts

    at(client, created + timedelta(days=2))  # past scratch's 1 day, within support's 30
    report = await sweeper.sweep()
    assert (report.archived, report.pruned) == (1, 0)
    now = await counts(client)
    assert (now["stored"], now["archived"], now["pruned"]) == (1, 1, 0)
    body = await replay(client, memory)
    states = [c["state"] for c in body["citations"]]
    assert states == ["stored", "archived"]
    assert body["citations"][1]["text"] == DIALOGUE[6:30]
    refused = await client.call("POST", "/v1/memories", {
        "namespace": "support/acme", "content": "late", "citations": [
            {"transcript_id": brief["id"], "start": 0, "end": 5}]})
    assert refused.status == 400 and refused.body["error"]["code"] == "transcript_archived"

    at(client, created + timedelta(days=2 + 7, hours=1))  # a week after archiving
    report = await sweeper.sweep()
    assert (report.archived, report.pruned) == (0, 1)
    (frame, pruned_at) = row(migrated_pg15_dsn,
                             "SELECT frame, pruned_at FROM transcripts WHERE id = %s",
                             brief["id"])
    assert frame is None and pruned_at is not None
    body = await replay(client, memory)
    pruned = body["citations"][1]
    assert pruned["state"] == "pruned" and pruned["text"] is None
    assert "pruned" in pruned["note"] and "no longer exists" in pruned["note"]
    assert body["citations"][0]["text"] == DIALOGUE[:40]
    whole = {t["id"]: t for t in body["transcripts"]}
    assert whole[brief["id"]]["state"] == "pruned" and whole[brief["id"]]["content"] is None
    assert whole[kept["id"]]["content"] == DIALOGUE

    at(client, created + timedelta(days=31))
    assert (await sweeper.sweep()).archived == 1
    at(client, created + timedelta(days=39))
    assert (await sweeper.sweep()).pruned == 1
    final = await counts(client)
    assert (final["stored"], final["archived"], final["pruned"]) == (0, 0, 2)
    caps = (await client.call("GET", "/v1/capabilities")).body["transcripts"]
    assert caps["sweeper"]["last"]["pruned"] == 1


async def test_sweeps_are_bounded_batches(make_cortex: MakeCortex,
                                          migrated_pg15_dsn: str) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY)
    for _ in range(5):
        await store_transcript(client, "scratch/many", "x")
    sweeper = client.services.transcripts
    sweeper.retention = dataclasses.replace(sweeper.retention, sweep_batch=2)
    at(client, datetime.now().astimezone() + timedelta(days=2))
    assert [(await sweeper.sweep()).archived for _ in range(4)] == [2, 2, 1, 0]
