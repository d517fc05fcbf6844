"""Every rejection path of the memory and recall API: a clear 4xx in the envelope, and
nothing written."""

import json
from typing import Any

import psycopg
import pytest

from tests.support.cortex import CortexClient


def memory_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memories").fetchone()
        assert row is not None
        return int(row[0])


GOOD = {"namespace": "kb", "content": "ok"}

BAD_STORES: list[tuple[str, Any, int, str]] = [
    ("not json", b"{nope", 400, "bad_json"),
    ("not an object", b"[1, 2]", 400, "invalid_input"),
    ("non-utf8", b'{"namespace": "kb", "content": "\xff\xfe"}', 400, "bad_encoding"),
    ("unknown field", {**GOOD, "colour": "red"}, 400, "invalid_input"),
    ("missing content", {"namespace": "kb"}, 400, "invalid_input"),
    ("content wrong type", {"namespace": "kb", "content": 42}, 400, "invalid_input"),
    ("tags wrong type", {**GOOD, "tags": "x"}, 400, "invalid_input"),
    ("metadata wrong type", {**GOOD, "metadata": [1]}, 400, "invalid_input"),
    ("namespace empty segment", {**GOOD, "namespace": "a//b"}, 400, "invalid_input"),
    ("namespace dotdot", {**GOOD, "namespace": "a/../b"}, 400, "invalid_input"),
    ("namespace too deep", {**GOOD, "namespace": "/".join("a" * 9)}, 400, "invalid_input"),
    ("namespace too long", {**GOOD, "namespace": "a" * 600}, 400, "invalid_input"),
    ("NUL in content", {**GOOD, "content": "a\u0000b"}, 400, "invalid_input"),
    ("NUL in title", {**GOOD, "title": "\u0000"}, 400, "invalid_input"),
    ("NUL in metadata key", {**GOOD, "metadata": {"k\u0000": 1}}, 400, "invalid_input"),
    ("NUL in metadata value", {**GOOD, "metadata": {"k": ["\u0000"]}}, 400, "invalid_input"),
    ("NUL in tag", {**GOOD, "tags": ["a\u0000"]}, 400, "invalid_input"),
    ("huge tag list", {**GOOD, "tags": [f"t{i}" for i in range(65)]}, 400, "invalid_input"),
    ("long tag", {**GOOD, "tags": ["x" * 65]}, 400, "invalid_input"),
    ("title too long", {**GOOD, "title": "x" * 513}, 400, "invalid_input"),
    ("content too large", {**GOOD, "content": "x" * (256 * 1024 + 1)}, 413, "too_large"),
    ("metadata too large", {**GOOD, "metadata": {"k": "x" * 17000}}, 413, "too_large"),
    ("body too large", {**GOOD, "content": "x" * (1024 * 1024 + 10)}, 413, "too_large"),
]


@pytest.mark.parametrize(("case", "body", "status", "code"), BAD_STORES,
                         ids=[c[0] for c in BAD_STORES])
async def test_bad_store_is_refused_and_writes_nothing(
    cortex: CortexClient, case: str, body: Any, status: int, code: str,
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = await cortex.call("POST", "/v1/memories", raw=raw)
    assert reply.status == status, reply.text
    assert reply.body["error"]["code"] == code
    assert reply.body["error"]["message"]
    assert memory_count(cortex.dsn) == 0


BAD_RECALLS: list[tuple[str, Any]] = [
    ("empty query", {"query": ""}),
    ("query wrong type", {"query": 1}),
    ("limit zero", {"query": "a", "limit": 0}),
    ("limit too high", {"query": "a", "limit": 101}),
    ("limit bool", {"query": "a", "limit": True}),
    ("budget negative", {"query": "a", "budget_tokens": -1}),
    ("bad namespace", {"query": "a", "namespace": "a/./b"}),
    ("unknown field", {"query": "a", "k": 1}),
    ("NUL in query", {"query": "a\u0000"}),
]


@pytest.mark.parametrize(("case", "body"), BAD_RECALLS, ids=[c[0] for c in BAD_RECALLS])
async def test_bad_recall_is_400(cortex: CortexClient, case: str, body: Any) -> None:
    reply = await cortex.call("POST", "/v1/recall", body)
    assert reply.status == 400, reply.text
    assert reply.body["error"]["details"]["field"]


async def test_bad_update_changes_nothing(cortex: CortexClient) -> None:
    stored = await cortex.store(content="original")
    path = f"/v1/memories/{stored['id']}"
    for body in ({"content": "a\u0000"}, {"revision": 3}, {"tags": ["x"] * 65},
                 {"expected_revision": 0}, {"content": None, "title": 5}):
        reply = await cortex.call("PATCH", path, body)
        assert reply.status == 400, (body, reply.text)
    after = await cortex.call("GET", path)
    assert after.body == stored


async def test_bad_ids_and_query_params(cortex: CortexClient) -> None:
    assert (await cortex.call("GET", "/v1/memories/not-a-uuid")).status == 400
    assert (await cortex.call("GET", "/v1/memories?limit=abc")).status == 400
    assert (await cortex.call("GET", "/v1/memories?limit=0")).status == 400
    assert (await cortex.call("GET", "/v1/memories?namespace=a//b")).status == 400


async def test_unknown_route_and_method_use_the_envelope(cortex: CortexClient) -> None:
    missing = await cortex.call("GET", "/v1/nothing-here")
    assert missing.status == 404 and missing.body["error"]["code"] == "not_found"
    wrong = await cortex.call("PUT", "/v1/recall", {"query": "a"})
    assert wrong.status == 405 and wrong.body["error"]["code"] == "method_not_allowed"
