"""Input that answered 500 on 9800398 (issue 13): each case is now a 4xx (or 503 for a
schema that is not there) in the error envelope, and nothing was written."""

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.server.body import MAX_JSON_DEPTH
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def envelope(reply: Any, status: int, code: str) -> None:
    assert reply.status == status, reply.text
    assert reply.body["error"]["code"] == code, reply.text
    assert reply.body["error"]["message"]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE_BODIES: list[tuple[str, bytes, str]] = [
    ("nested 1000 levels", b'{"namespace": "kb", "content": "x", "metadata": {"k": '
     + nested(1000).encode() + b"}}", "too_deep"),
    ("nested 100000 levels", nested(100_000).encode(), "too_deep"),
    ("nested past the limit", b'{"namespace": "kb", "content": "x", "metadata": {"k": '
     + nested(MAX_JSON_DEPTH).encode() + b"}}", "too_deep"),
    ("integer of 5000 digits", b'{"namespace": "kb", "content": "x", "metadata": {"n": '
     + b"9" * 5000 + b"}}", "bad_json"),
    ("NaN", b'{"namespace": "kb", "content": "x", "metadata": {"n": NaN}}', "bad_json"),
    ("float overflow", b'{"namespace": "kb", "content": "x", "metadata": {"n": 1e999}}',
     "bad_json"),
    ("lone surrogate in content", b'{"namespace": "kb", "content": "a\\ud800b"}',
     "bad_encoding"),
    ("lone low surrogate in title", b'{"namespace": "kb", "content": "x", "title": "\\udfff"}',
     "bad_encoding"),
    ("lone surrogate in a metadata key", b'{"namespace": "kb", "content": "x", '
     b'"metadata": {"\\uD800": 1}}', "bad_encoding"),
    ("lone surrogate in a tag", b'{"namespace": "kb", "content": "x", "tags": ["\\ud83d"]}',
     "bad_encoding"),
]


@pytest.mark.parametrize(("case", "raw", "code"), HOSTILE_BODIES,
                         ids=[c[0] for c in HOSTILE_BODIES])
async def test_hostile_store_is_400(cortex: CortexClient, case: str, raw: bytes,
                                    code: str) -> None:
    envelope(await cortex.call("POST", "/v1/memories", raw=raw), 400, code)
    assert count(cortex.dsn, "memories") == 0


async def test_nesting_within_the_limit_and_surrogate_pairs_are_stored(
    cortex: CortexClient,
) -> None:
    deep = json.loads(nested(MAX_JSON_DEPTH - 2))
    raw = json.dumps({"namespace": "kb", "content": "pair \ud83d\ude00 ok",
                      "metadata": {"k": deep}}).encode()  # ensure_ascii: a \\ud83d\\ude00 pair
    reply = await cortex.call("POST", "/v1/memories", raw=raw)
    assert reply.status == 201, reply.text
    assert reply.body["content"] == "pair \U0001f600 ok" and reply.body["metadata"]["k"] == deep


async def test_lone_surrogate_on_update_is_400_and_changes_nothing(cortex: CortexClient) -> None:
    memory = await cortex.store("kb", "before")
    path = f"/v1/memories/{memory['id']}"
    for raw in (b'{"content": "\\ud800"}', b'{"title": "x\\udc00"}',
                b'{"metadata": {"k": ["\\ud800"]}}'):
        envelope(await cortex.call("PATCH", path, raw=raw), 400, "bad_encoding")
    after = (await cortex.call("GET", path)).body
    assert (after["content"], after["revision"]) == ("before", 1)


EDGE_INSTANTS = ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"]


@pytest.mark.parametrize("moment", EDGE_INSTANTS)
@pytest.mark.parametrize("field", ["valid_from", "valid_until"])
async def test_link_instants_past_the_calendar_are_400(
    cortex: CortexClient, moment: str, field: str,
) -> None:
    a, b = (await cortex.store("kb", "a"))["id"], (await cortex.store("kb", "b"))["id"]
    body = {"src_id": a, "dst_id": b, "relation": "related_to", field: moment}
    reply = await cortex.call("POST", "/v1/links", body)
    envelope(reply, 400, "invalid_input")
    assert reply.body["error"]["details"]["field"] == field
    assert "0001..9999" in reply.body["error"]["message"]
    assert count(cortex.dsn, "links") == 0


@pytest.mark.parametrize("moment", EDGE_INSTANTS)
async def test_invalidate_and_queries_past_the_calendar_are_400(
    cortex: CortexClient, moment: str,
) -> None:
    a, b = (await cortex.store("kb", "a"))["id"], (await cortex.store("kb", "b"))["id"]
    link = (await cortex.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                    "relation": "related_to"})).body
    reply = await cortex.call("POST", "/v1/kg/invalidate",
                              {"link_id": link["id"], "valid_until": moment})
    envelope(reply, 400, "invalid_input")
    assert reply.body["error"]["details"]["field"] == "valid_until"
    assert "None" not in reply.body["error"]["message"]
    for path, body in (("/v1/kg/query", {"start_id": a, "valid_at": moment}),
                       ("/v1/kg/paths", {"src_id": a, "dst_id": b, "valid_at": moment})):
        envelope(await cortex.call("POST", path, body), 400, "invalid_input")
    timeline = await cortex.call("GET", f"/v1/kg/timeline?memory_id={a}")
    assert timeline.body["links"][0]["valid_until"] is None  # the link is unchanged


async def test_latest_instant_in_utc_round_trips(cortex: CortexClient) -> None:
    a, b = (await cortex.store("kb", "a"))["id"], (await cortex.store("kb", "b"))["id"]
    reply = await cortex.call("POST", "/v1/links", {
        "src_id": a, "dst_id": b, "relation": "related_to",
        "valid_from": "0001-01-01T00:00:00Z", "valid_until": "9999-12-31T23:59:59.999Z"})
    assert reply.status == 201, reply.text
    timeline = await cortex.call("GET", f"/v1/kg/timeline?memory_id={a}")
    assert timeline.status == 200 and len(timeline.body["links"]) == 1


async def test_signed_link_before_1970_is_400(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    write_identity(tmp_path / "keys" / "tester", generate_key(AgentId("dev:tester")))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=tmp_path / "keys",
                               graph_backend="CTE")
    a, b = (await client.store("kb", "a"))["id"], (await client.store("kb", "b"))["id"]
    body = {"src_id": a, "dst_id": b, "relation": "related_to",
            "valid_from": "1969-12-31T23:59:59.999Z"}
    reply = await client.call("POST", "/v1/links", body)
    envelope(reply, 400, "invalid_input")
    assert reply.body["error"]["details"]["field"] == "valid_from"
    assert count(client.dsn, "links") == 0
    on_epoch = await client.call("POST", "/v1/links", {**body, "valid_from": "1970-01-01T00:00Z"})
    assert on_epoch.status == 201 and on_epoch.body["attest_level"] == "self_signed"


async def test_unsigned_link_before_1970_is_stored(cortex: CortexClient) -> None:
    a, b = (await cortex.store("kb", "a"))["id"], (await cortex.store("kb", "b"))["id"]
    reply = await cortex.call("POST", "/v1/links", {
        "src_id": a, "dst_id": b, "relation": "related_to", "valid_from": "1900-01-01T00:00Z"})
    assert reply.status == 201 and reply.body["attest_level"] == "unsigned"


async def test_features_missing_from_a_partial_schema_are_503(
    make_cortex: MakeCortex, pg15_dsn: str,
) -> None:
    await migrate(pg15_dsn, target=2)
    client = await make_cortex(pg15_dsn, migrated=False, graph_backend="CTE")
    with psycopg.connect(pg15_dsn) as conn:  # rows as the schema-2 build wrote them
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        for memory_id in (a, b):
            conn.execute("INSERT INTO memories (id, namespace, content, author) "
                         "VALUES (%s, 'kb', 'text', 'dev:tester')", (memory_id,))
    link = await client.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                   "relation": "related_to"})
    envelope(link, 503, "schema_missing")
    assert "cortexctl migrate" in link.body["error"]["message"]
    envelope(await client.call("GET", "/v1/audit/verify"), 503, "schema_missing")
    # every write records itself in the audit chain (migration 0006), so writes need it too
    store = await client.call("POST", "/v1/memories", {"namespace": "kb", "content": "c"})
    envelope(store, 503, "schema_missing")
    ready = await client.call("GET", "/readyz")
    assert ready.status == 503 and ready.body["checks"]["schema"]["version"] == 2
    assert count(pg15_dsn, "links") == 0 and count(pg15_dsn, "memories") == 2


async def test_405_keeps_allow(cortex: CortexClient) -> None:
    reply = await cortex.call("PUT", "/v1/memories", {"namespace": "kb", "content": "x"})
    envelope(reply, 405, "method_not_allowed")
    assert "POST" in reply.headers["Allow"]


@pytest.mark.parametrize("content_type", [
    "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "application/json; charset=latin-1",
])
async def test_non_json_content_types_are_415(cortex: CortexClient, content_type: str) -> None:
    body = {"namespace": "kb", "content": "x"}
    for method, path in (("POST", "/v1/memories"), ("POST", "/v1/recall")):
        reply = await cortex.call(method, path, body if path.endswith("memories")
                                  else {"query": "x"}, headers={"Content-Type": content_type})
        envelope(reply, 415, "unsupported_media_type")
    assert count(cortex.dsn, "memories") == 0


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "application/merge-patch+json",
    "Application/JSON; charset=UTF-8",
])
async def test_json_content_types_are_accepted(cortex: CortexClient, content_type: str) -> None:
    reply = await cortex.call("POST", "/v1/memories", {"namespace": "kb", "content": "x"},
                              headers={"Content-Type": content_type})
    assert reply.status == 201, reply.text
