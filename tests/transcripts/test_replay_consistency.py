"""A replay racing a prune says ``pruned``, never ``unreadable`` (issue 20, item 14).

The replay reads a memory's citations (with each transcript's row) when it finds its
target, and the frames later, when it runs: a prune between the two left a row that said
"stored" beside a frame that was gone, the state meant for an altered frame. The race is
made certain here by running the real replay call's two steps around a real sweep, on real
PostgreSQL, instead of hoping a sweep every 0.2 s falls between them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from attested_cortex.service.pipeline.context import Caller
from attested_cortex.service.resources.transcript_commands import ReplayMemory
from attested_cortex.service.resources.transcripts import ReplayCall
from attested_cortex.types import AgentId
from tests.support.cortex import MakeCortex
from tests.transcripts.common import store_transcript
from tests.transcripts.test_api import cite

SETTINGS = {"transcripts": {"enabled": True, "retention_days": 1, "prune_after_days": 0}}


async def test_a_prune_between_the_citations_and_the_frames_reads_pruned(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, **SETTINGS)
    stored = await store_transcript(client)
    memory = await client.store("support/acme", "m", citations=[cite(stored, 0, 4)])
    svc, caller = client.services, Caller(AgentId(client.agent), "dev")
    call = ReplayCall(ReplayMemory(memory_id=uuid.UUID(memory["id"]), full=True))
    await call.target(svc, caller)  # the citations, read before the sweep
    sweeper = svc.transcripts
    sweeper.clock = lambda: datetime.now(UTC) + timedelta(days=2)
    assert (await sweeper.sweep()).archived == 1
    assert (await sweeper.sweep()).pruned == 1
    answer = await call.execute(svc, caller)  # the frames, read after it
    (citation,) = answer["citations"]
    assert (citation["state"], citation["text"]) == ("pruned", None), citation
    assert "pruned" in citation["note"]
    (transcript,) = answer["transcripts"]
    assert transcript["state"] == "pruned" and transcript["readable"] is False
    replay = await client.call("GET", f"/v1/memories/{memory['id']}/replay")
    assert replay.body["citations"] == answer["citations"]
