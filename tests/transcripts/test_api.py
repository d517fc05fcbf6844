"""``POST /v1/transcripts`` and ``GET /v1/memories/{id}/replay`` over real HTTP on a real
PostgreSQL: round trip, spans and several citations, the disabled-namespace 403, the size
and bomb limits, ownership, and hostile input (every refusal a 4xx, nothing written)."""

from __future__ import annotations

import base64
import json
import resource
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
import zstandard

from tests.support.cortex import CortexClient, MakeCortex
from tests.transcripts.bombs import declared_bomb, streamed_bomb
from tests.transcripts.common import DIALOGUE, count, row, store_transcript

ON = {"enabled": True, "namespaces": [{"namespace": "support/**"}]}


@pytest.fixture
async def client(make_cortex: MakeCortex, migrated_pg15_dsn: str) -> CortexClient:
    return await make_cortex(migrated_pg15_dsn, migrated=False,
                             transcripts={**ON, "max_bytes": 64 * 1024})


def cite(transcript: Any, start: int, end: int) -> dict[str, Any]:
    return {"transcript_id": transcript["id"], "start": start, "end": end}


async def test_round_trip_stores_a_zstd_frame_and_replays_the_text(
    client: CortexClient,
) -> None:
    stored = await store_transcript(client, metadata={"channel": "slack"})
    assert stored["owner"] == "dev:tester" and stored["state"] == "stored"
    assert stored["raw_bytes"] == len(DIALOGUE.encode()) and stored["metadata"] == {
        "channel": "slack"}
    frame, raw_bytes, stored_bytes = row(
        client.dsn, "SELECT frame, raw_bytes, stored_bytes FROM transcripts WHERE id = %s",
        stored["id"])
    frame = bytes(frame)
    assert frame[:4] == b"\x28\xb5\x2f\xfd" and stored_bytes == len(frame) < raw_bytes
    assert zstandard.ZstdDecompressor().decompress(frame).decode() == DIALOGUE
    assert b"analytics" not in frame  # the text is compressed at rest, not stored beside it
    memory = await client.store("support/acme", "staging deploys wait on reporting locks",
                                citations=[cite(stored, 0, 120)])
    full = await client.call("GET", f"/v1/memories/{memory['id']}/replay?full=true")
    assert full.status == 200, full.text
    assert full.body["transcripts"][0]["content"] == DIALOGUE
    assert full.body["citations"][0]["text"] == DIALOGUE[:120]


async def test_replay_returns_each_cited_span_in_order_across_transcripts(
    client: CortexClient,
) -> None:
    first = await store_transcript(client)
    second = await store_transcript(client, content="user: é🔑 clé\nagent: noted\n")
    spans = [cite(first, DIALOGUE.index("A long"), DIALOGUE.index("I cancelled")),
             cite(second, 6, 12), cite(first, 0, 10)]
    memory = await client.store("support/acme", "lock from reporting", citations=spans)
    replay = await client.call("GET", f"/v1/memories/{memory['id']}/replay")
    assert replay.status == 200, replay.text
    got = replay.body
    assert [c["text"] for c in got["citations"]] == [
        "A long analytics query from the reporting role; ", "é🔑 clé", "user: The "]
    assert all(c["state"] == "stored" for c in got["citations"])
    assert [c["transcript_id"] for c in got["citations"]] == [
        first["id"], second["id"], first["id"]]
    assert {t["id"] for t in got["transcripts"]} == {first["id"], second["id"]}
    assert all("content" not in t for t in got["transcripts"])  # spans only by default
    plain = await client.store("support/acme", "cites nothing")
    nothing = await client.call("GET", f"/v1/memories/{plain['id']}/replay")
    assert nothing.body["citations"] == [] and nothing.body["transcripts"] == []


async def test_disabled_namespaces_refuse_with_403_and_store_nothing(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    off = await make_cortex(migrated_pg15_dsn, migrated=False)  # the default: off
    reply = await off.call("POST", "/v1/transcripts", {"namespace": "a", "content": "x"})
    assert reply.status == 403, reply.text
    assert reply.body["error"]["code"] == "transcripts_disabled"
    assert "spec.transcripts" in reply.body["error"]["message"]
    on = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=ON)
    outside = await on.call("POST", "/v1/transcripts", {"namespace": "sales/x", "content": "x"})
    assert outside.status == 403 and outside.body["error"]["code"] == "transcripts_disabled"
    assert count(migrated_pg15_dsn, "transcripts") == 0
    await store_transcript(on, "support/x")
    assert count(migrated_pg15_dsn, "transcripts") == 1


async def test_size_limit_is_413_for_text_and_for_frames(client: CortexClient) -> None:
    big = "x" * (64 * 1024 + 1)
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                           "content": big})
    assert reply.status == 413 and reply.body["error"]["code"] == "transcript_too_large"
    frame = base64.b64encode(zstandard.ZstdCompressor().compress(big.encode())).decode()
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                           "frame": frame})
    assert reply.status == 413, reply.text
    assert count(client.dsn, "transcripts") == 0


async def test_an_imported_frame_is_stored_like_text(client: CortexClient) -> None:
    frame = base64.b64encode(zstandard.ZstdCompressor(level=19).compress(DIALOGUE.encode()))
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                           "frame": frame.decode()})
    assert reply.status == 201, reply.text
    assert reply.body["raw_chars"] == len(DIALOGUE)
    # refused as the same text sent as content is (before: a frame with NUL was a 201)
    nul = base64.b64encode(zstandard.ZstdCompressor().compress(b"a\x00b")).decode()
    framed = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                            "frame": nul})
    text = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                          "content": "a\x00b"})
    assert framed.status == text.status == 400, framed.text
    assert framed.body["error"]["details"]["field"] == text.body["error"]["details"]["field"] \
        == "content"
    assert count(client.dsn, "transcripts") == 1


@pytest.mark.parametrize("bomb", [streamed_bomb, declared_bomb])
async def test_a_zstd_bomb_is_refused_without_inflating(client: CortexClient,
                                                        bomb: Any) -> None:
    inflated = 256 * 1024 * 1024 if bomb is streamed_bomb else 16 * 1024 * 1024
    frame = bomb(inflated)
    assert len(frame) < 64 * 1024  # a few kilobytes on the wire
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reply = await client.call("POST", "/v1/transcripts", {
        "namespace": "support/a", "frame": base64.b64encode(frame).decode()})
    assert reply.status == 413, reply.text
    assert reply.body["error"]["code"] == "transcript_too_large"
    # The server runs in this process: its peak memory did not take the inflated size.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 64 * 1024
    assert count(client.dsn, "transcripts") == 0


async def test_a_stored_frame_replaced_by_a_bomb_reads_unreadable(
    client: CortexClient,
) -> None:
    stored = await store_transcript(client)
    memory = await client.store("support/acme", "m", citations=[cite(stored, 0, 4)])
    with psycopg.connect(client.dsn) as conn:
        conn.execute("UPDATE transcripts SET frame = %s WHERE id = %s",
                     (streamed_bomb(64 * 1024 * 1024), stored["id"]))
    reply = await client.call("GET", f"/v1/memories/{memory['id']}/replay?full=true")
    assert reply.status == 200, reply.text
    citation = reply.body["citations"][0]
    assert citation["state"] == "unreadable" and citation["text"] is None
    assert reply.body["transcripts"][0]["readable"] is False
    assert reply.body["transcripts"][0]["content"] is None


async def test_replay_of_another_agents_memory_is_refused(client: CortexClient) -> None:
    stored = await store_transcript(client)
    memory = await client.store("support/acme", "mine", citations=[cite(stored, 0, 20)])
    reply = await client.call("GET", f"/v1/memories/{memory['id']}/replay", agent="dev:other")
    assert reply.status == 403, reply.text
    assert reply.body["error"]["code"] == "not_owner"
    assert "user:" not in reply.text
    # nor may another agent cite my transcript
    theirs = await client.call("POST", "/v1/memories", {
        "namespace": "support/acme", "content": "stolen", "citations": [cite(stored, 0, 5)]},
        agent="dev:other")
    assert theirs.status == 400 and theirs.body["error"]["code"] == "unknown_transcript"


async def test_replay_obeys_scopes_and_rules(make_cortex: MakeCortex,
                                             migrated_pg15_dsn: str) -> None:
    deny = {"source": "t/no-trails", "namespace": "support/**", "agents": ["*"],
            "operations": ["transcript"], "decision": "deny", "reason": "no trails here"}
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=ON)
    stored = await store_transcript(client)
    memory = await client.store("support/acme", "m", citations=[cite(stored, 0, 4)])
    enforced = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=ON,
                                 permissions={"mode": "enforce", "rules": [deny]})
    for method, path, body in [("GET", f"/v1/memories/{memory['id']}/replay", None),
                               ("POST", "/v1/transcripts", {"namespace": "support/b",
                                                            "content": "x"})]:
        reply = await enforced.call(method, path, body)
        assert reply.status == 403, reply.text
        assert reply.body["error"]["details"]["source"] == "rule:t/no-trails"


@pytest.mark.parametrize(("body", "code"), [
    ('{"namespace": "support/a", "content": "lone \\ud800 surrogate"}', 400),
    ('{"namespace": "support/a", "content": "x", "frame": "eA=="}', 400),
    ('{"namespace": "support/a"}', 400),
    ('{"namespace": "support/a", "frame": "not base64!"}', 400),
    ('{"namespace": "support/a", "frame": "bm90IHpzdGQ="}', 400),
    ('{"namespace": "../etc", "content": "x"}', 400),
    ('{"namespace": "support/a", "content": "x", "metadata": {"k": "\\u0000"}}', 400),
])
async def test_hostile_transcripts_are_4xx(client: CortexClient, body: str, code: int) -> None:
    reply = await client.call("POST", "/v1/transcripts", raw=body.encode())
    assert reply.status == code, reply.text
    assert count(client.dsn, "transcripts") == 0


@pytest.mark.parametrize(("spans", "code"), [
    ([{"start": 0, "end": 10**30}], "invalid_input"),
    ([{"start": 2**31 - 2, "end": 2**31 - 1}], "bad_span"),
    ([{"start": -1, "end": 3}], "invalid_input"),
    ([{"start": 5, "end": 5}], "bad_span"),
    ([{"start": 9, "end": 3}], "bad_span"),
    ([{"start": 0, "end": 10}, {"start": 5, "end": 15}], "overlapping_spans"),
    ([{"start": 0, "end": "3"}], "invalid_input"),
    ([{"start": 0, "end": 3, "transcript_id": str(uuid.uuid4())}], "unknown_transcript"),
    ([{"start": 0, "end": 3, "transcript_id": "not-a-uuid"}], "invalid_input"),
])
async def test_hostile_citations_are_400_and_store_nothing(
    client: CortexClient, spans: list[dict[str, Any]], code: str,
) -> None:
    stored = await store_transcript(client)
    citations = [{"transcript_id": stored["id"], **s} for s in spans]
    before = count(client.dsn, "memories")
    reply = await client.call("POST", "/v1/memories", {
        "namespace": "support/acme", "content": "c", "citations": citations})
    assert reply.status == 400, reply.text
    assert reply.body["error"]["code"] == code
    assert count(client.dsn, "memories") == before
    assert count(client.dsn, "memory_transcript_links") == 0


async def test_replay_flag_and_id_are_checked(client: CortexClient) -> None:
    memory = await client.store("support/acme", "m")
    bad_flag = await client.call("GET", f"/v1/memories/{memory['id']}/replay?full=maybe")
    assert bad_flag.status == 400
    assert (await client.call("GET", "/v1/memories/nope/replay")).status == 400
    missing = await client.call("GET", f"/v1/memories/{uuid.uuid4()}/replay")
    assert missing.status == 404


async def test_the_redaction_hook_masks_a_key_before_it_is_compressed(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    hook = {"name": "redact", "events": ["pre_transcript_store"], "mode": "exec",
            "timeout_ms": 3000, "fail_mode": "closed",
            "command": [sys.executable, "-m", "attested_cortex.hooks.reference.redact"]}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path,
                               transcripts=ON)
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    text = f"user: use key {key} for the bucket\nagent: done, rotating it tomorrow\n"
    stored = await store_transcript(client, content=text)
    (frame,) = row(migrated_pg15_dsn, "SELECT frame FROM transcripts WHERE id = %s",
                   stored["id"])
    inflated = zstandard.ZstdDecompressor().decompress(bytes(frame)).decode()
    assert key not in inflated and "[REDACTED:aws_access_key]" in inflated
    assert key.encode() not in bytes(frame)
    assert "rotating it tomorrow" in inflated
    memory = await client.store("support/acme", "bucket key rotated",
                                citations=[cite(stored, 0, stored["raw_chars"])])
    replay = await client.call("GET", f"/v1/memories/{memory['id']}/replay?full=true")
    assert key not in replay.text and "[REDACTED:aws_access_key]" in replay.text


async def test_capabilities_report_where_how_long_and_how_many(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts={
        "enabled": True, "retention_days": 30, "prune_after_days": 3,
        "namespaces": [{"namespace": "support/**", "retention_days": 90},
                       {"namespace": "scratch/*"}]})
    await store_transcript(client)
    await store_transcript(client, "scratch/x")
    caps = (await client.call("GET", "/v1/capabilities")).body["transcripts"]
    assert caps["enabled"] is True
    assert caps["namespaces"] == [{"namespace": "support/**", "retention_days": 90},
                                  {"namespace": "scratch/*", "retention_days": 30}]
    assert caps["prune_after_days"] == 3 and caps["compression"] == {"codec": "zstd",
                                                                     "level": 3}
    assert caps["counts"]["stored"] == 2 and caps["counts"]["archived"] == 0
    assert caps["counts"]["raw_bytes"] > caps["counts"]["stored_bytes"] > 0
    assert caps["sweeper"]["running"] is True
    off = await make_cortex(migrated_pg15_dsn, migrated=False)
    caps = (await off.call("GET", "/v1/capabilities")).body["transcripts"]
    assert caps["enabled"] is False and caps["namespaces"] == []
    assert caps["counts"]["stored"] == 2  # live state of the database, not the setting


async def test_replay_needs_read_scope_on_every_cited_namespace(client: CortexClient) -> None:
    elsewhere = await store_transcript(client, "support/other")
    memory = await client.store("support/acme", "m", citations=[cite(elsewhere, 0, 4)])
    narrowed = await client.call("GET", f"/v1/memories/{memory['id']}/replay",
                                 headers={"X-Cortex-Scopes": "memory.read:support/acme"})
    assert narrowed.status == 403, narrowed.text
    assert narrowed.body["error"]["code"] == "scope_denied"
    assert narrowed.body["error"]["details"]["namespace"] == "support/other"
    wide = await client.call("GET", f"/v1/memories/{memory['id']}/replay",
                             headers={"X-Cortex-Scopes": "memory.read:support/**"})
    assert wide.status == 200, wide.text


async def test_replay_of_a_deleted_memory_is_404(client: CortexClient) -> None:
    stored = await store_transcript(client)
    memory = await client.store("support/acme", "m", citations=[cite(stored, 0, 4)])
    assert (await client.call("DELETE", f"/v1/memories/{memory['id']}")).status == 200
    reply = await client.call("GET", f"/v1/memories/{memory['id']}/replay")
    assert reply.status == 404 and reply.body["error"]["code"] == "memory_deleted"


async def test_a_lone_surrogate_past_the_json_reader_is_400(client: CortexClient) -> None:
    # An in-process caller (an MCP tool wrapping the service function) skips the HTTP body
    # reader that refuses lone surrogates: the service refuses them too.
    from attested_cortex.errors import InvalidInputError
    from attested_cortex.service.pipeline.context import Caller
    from attested_cortex.service.resources.transcript_commands import StoreTranscript
    from attested_cortex.service.resources.transcripts import store_transcript as store
    from attested_cortex.types import AgentId

    with pytest.raises(InvalidInputError) as caught:
        await store(client.services, Caller(AgentId("dev:tester"), "dev"),
                    StoreTranscript(namespace="support/a", content="half \ud800 a pair"))
    assert caught.value.code == "bad_encoding"
    assert count(client.dsn, "transcripts") == 0


async def test_transcripts_work_as_the_least_privilege_app_role(
    make_cortex: MakeCortex, any_database: Any,
) -> None:
    from attested_cortex.store.migrating import migrate

    await migrate(any_database.dsn, app_role="cortex_app")
    app = await make_cortex(any_database.server.app_dsn(any_database.name), migrated=False,
                            transcripts={"enabled": True, "retention_days": 1,
                                         "prune_after_days": 0})
    stored = await store_transcript(app)
    memory = await app.store("support/acme", "m", citations=[cite(stored, 0, 4)])
    assert (await app.call("GET", f"/v1/memories/{memory['id']}/replay")).status == 200
    sweeper = app.services.transcripts
    sweeper.clock = lambda: datetime.now(UTC) + timedelta(days=2)
    assert (await sweeper.sweep()).archived == 1
    assert (await sweeper.sweep()).pruned == 1
    replay = await app.call("GET", f"/v1/memories/{memory['id']}/replay")
    assert replay.body["citations"][0]["state"] == "pruned"


@pytest.mark.parametrize(("delta", "status", "code"), [
    ({"namespace": "sales/x"}, 403, "transcripts_disabled"),
    ({"content": "y" * (64 * 1024 + 1)}, 413, "transcript_too_large"),
    ({"metadata": "not an object"}, 400, "hook_invalid_modify"),
])
async def test_a_hook_modify_is_checked_like_a_request(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
    delta: dict[str, Any], status: int, code: str,
) -> None:
    recorder = str(Path(__file__).parents[1] / "server" / "programs" / "recorder.py")
    hook = {"name": "mover", "events": ["pre_transcript_store"], "mode": "exec",
            "timeout_ms": 3000, "command": [sys.executable, recorder],
            "env": {"RECORD_FILE": str(tmp_path / "record.jsonl"),
                    "RECORDER_ANSWER": json.dumps({"decision": "modify", "delta": delta})}}
    path = tmp_path / "hooks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hooks": [hook]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, hooks_file=path,
                               transcripts={**ON, "max_bytes": 64 * 1024})
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "support/a",
                                                           "content": "x"})
    assert reply.status == status, reply.text
    assert reply.body["error"]["code"] == code
    assert count(migrated_pg15_dsn, "transcripts") == 0


async def test_what_one_memory_cites_and_one_replay_inflates_is_bounded(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    """A replay inflates every cited transcript whole: 64 citations of 1 MiB transcripts
    (stored as small frames, next to nothing against the quota) were one 64 MB answer and
    over 1 GB of server memory over MCP. A memory may cite at most replay_budget bytes of
    transcripts (413 citations_too_large, nothing stored), and a memory that cites more
    (stored before the bound) is 413 replay_too_large before anything is inflated. Before
    the bound, the citing store below was a 201."""
    from attested_cortex.service.resources.transcripts import REPLAY_MIN_BYTES
    from tests.mcp.conftest import mcp_client

    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=ON)
    mib = ("x" * 1023 + "\n") * 1024
    frame = base64.b64encode(zstandard.ZstdCompressor().compress(mib.encode())).decode()
    fits = REPLAY_MIN_BYTES // len(mib)
    stored = [await store_transcript(client, content=None, frame=frame)
              for _ in range(fits + 1)]
    too_much = await client.call("POST", "/v1/memories", {
        "namespace": "support/acme", "content": "c",
        "citations": [cite(t, 0, 1) for t in stored]})
    assert too_much.status == 413, too_much.text
    assert too_much.body["error"]["code"] == "citations_too_large"
    assert too_much.body["error"]["details"]["limit"] == REPLAY_MIN_BYTES
    assert count(client.dsn, "memories") == 0
    memory = await client.call("POST", "/v1/memories", {
        "namespace": "support/acme", "content": "c",
        "citations": [cite(t, 0, 1) for t in stored[:fits]]})
    assert memory.status == 201, memory.text
    whole = await client.call("GET", f"/v1/memories/{memory.body['id']}/replay?full=true")
    assert whole.status == 200 and len(whole.body["transcripts"]) == fits
    with psycopg.connect(client.dsn, autocommit=True) as conn:  # as cited before the bound
        conn.execute("INSERT INTO memory_transcript_links (memory_id, ordinal, transcript_id, "
                     "span_start, span_end) VALUES (%s, %s, %s, 0, 1)",
                     (memory.body["id"], fits, stored[fits]["id"]))
    refused = await client.call("GET", f"/v1/memories/{memory.body['id']}/replay")
    assert refused.status == 413, refused.text
    assert refused.body["error"]["code"] == "replay_too_large"
    async with mcp_client(client) as mcp:
        tool = await mcp.call_tool("memory_replay", {"memory_id": memory.body["id"]})
    assert tool.is_error
    assert (tool.structured_content["status"],
            tool.structured_content["error"]["code"]) == (413, "replay_too_large")
