"""Transcripts against the per-agent storage quota, over real HTTP on a real database: a
transcript counts its compressed frame (and metadata) until it is pruned; a store past the
quota is refused like a memory store (413 ``storage_quota_exceeded``) with nothing written;
memories and transcripts share the one quota; pruning frees the bytes."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from attested_cortex.transcripts import framing
from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.common import DIALOGUE, count, row, store_transcript

POLICY = {"enabled": True, "prune_after_days": 7, "sweep_interval_seconds": 86400,
          "namespaces": [{"namespace": "support/**", "retention_days": 1}]}
#: What one DIALOGUE transcript with empty metadata counts: its frame and ``{}``.
ONE = len(framing.compress(DIALOGUE)) + len(b"{}")


async def usage(client: CortexClient, agent: str = "dev:tester") -> dict[str, Any]:
    reply = await client.call("GET", "/v1/capabilities", agent=agent)
    you: dict[str, Any] = reply.body["quotas"]["you"]
    return you


async def test_the_compressed_frame_is_what_counts(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               quotas={"enabled": False, "storage_per_agent_bytes": 4096})
    big = "user: same words again and again\n" * 3000  # 102 KB of text, 25x the quota
    stored = await store_transcript(client, content=big, metadata={"channel": "chat"})
    assert stored["raw_bytes"] == len(big) and stored["stored_bytes"] < 4096
    (expected,) = row(client.dsn, "SELECT stored_bytes + octet_length(metadata::text) "
                      "FROM transcripts WHERE id = %s", stored["id"])
    you = await usage(client)
    assert you["stored_bytes_by_kind"] == {"memories": 0, "transcripts": expected, "spoke": 0}
    assert you["stored_bytes"] == expected


async def test_over_quota_is_refused_like_a_memory_store_and_pruning_frees_it(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               quotas={"enabled": False, "storage_per_agent_bytes": 2 * ONE - 1})
    first = await store_transcript(client)
    assert (await usage(client))["stored_bytes"] == ONE
    refused = await client.call("POST", "/v1/transcripts",
                                {"namespace": "support/acme", "content": DIALOGUE})
    assert refused.status == 413, refused.text
    error = refused.body["error"]
    assert error["code"] == "storage_quota_exceeded"
    assert error["details"] == {"limit": 2 * ONE - 1, "used": ONE, "adds": ONE,
                                "quota": "storage_per_agent_bytes"}
    assert count(client.dsn, "transcripts") == 1
    memory = await client.call("POST", "/v1/memories",  # one quota for both kinds
                               {"namespace": "support/acme", "content": "m" * ONE})
    assert memory.status == 413 and memory.body["error"]["code"] == "storage_quota_exceeded"
    other = await client.call("POST", "/v1/transcripts", {
        "namespace": "support/acme", "content": DIALOGUE}, agent="dev:other")
    assert other.status == 201  # per agent

    (created,) = row(client.dsn, "SELECT created_at FROM transcripts WHERE id = %s",
                     first["id"])
    sweeper = client.services.transcripts
    sweeper.clock = lambda: created + timedelta(days=2)
    assert (await sweeper.sweep()).archived == 2
    assert (await usage(client))["stored_bytes"] == ONE  # archived frames are still at rest
    sweeper.clock = lambda: created + timedelta(days=10)
    assert (await sweeper.sweep()).pruned == 2
    assert (await usage(client))["stored_bytes_by_kind"]["transcripts"] == 0
    await store_transcript(client)  # the pruned bytes were freed


async def test_a_redacting_hook_is_charged_for_what_is_stored(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text(yaml.safe_dump({"version": 1, "hooks": [{
        "name": "shrink", "events": ["pre_transcript_store"], "mode": "exec",
        "timeout_ms": 5000, "fail_mode": "closed", "command": [
            sys.executable, "-c", "import json; print(json.dumps({'decision': 'modify', "
            "'delta': {'content': 'user: hi'}}))"]}]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY,
                               hooks_file=str(hooks),
                               quotas={"enabled": False, "storage_per_agent_bytes": ONE - 1})
    stored = await store_transcript(client)  # the whole dialogue would not fit; "hi" does
    assert stored["raw_bytes"] == len("user: hi")
    assert (await usage(client))["stored_bytes"] == stored["stored_bytes"] + 2


async def test_metadata_is_bounded_like_a_memory_s(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=POLICY)
    refused = await client.call("POST", "/v1/transcripts", {
        "namespace": "support/acme", "content": DIALOGUE, "metadata": {"k": "v" * 20_000}})
    assert refused.status == 413, refused.text
    assert refused.body["error"]["details"] == {"field": "metadata", "limit": 16 * 1024}
    assert count(client.dsn, "transcripts") == 0
    await store_transcript(client, metadata={"k": "v" * 16_000})
