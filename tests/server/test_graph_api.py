"""Links and the knowledge graph over HTTP, on both backends (CTE on PostgreSQL 15, Cypher
on PostgreSQL 17 + AGE): the same requests, the same answers."""

import itertools

import psycopg
import pytest

from tests.support.cortex import CortexClient, MakeCortex


@pytest.fixture
async def kg(make_cortex: MakeCortex, any_dsn: str) -> CortexClient:
    backend = "CTE" if await _is_pg15(any_dsn) else "AGE"
    return await make_cortex(any_dsn, graph_backend=backend)


async def _is_pg15(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW server_version_num").fetchone()
        assert row is not None
        return int(row[0]) < 170000


async def chain(kg: CortexClient, n: int) -> list[str]:
    ids = [(await kg.store("g", f"node {i}"))["id"] for i in range(n)]
    for a, b in itertools.pairwise(ids):
        reply = await kg.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                    "relation": "related_to"})
        assert reply.status == 201, reply.text
    return ids


async def test_backend_is_reported(kg: CortexClient) -> None:
    caps = (await kg.call("GET", "/v1/capabilities")).body
    assert caps["kg_backend"] in ("age", "cte")


async def test_link_then_query_paths_timeline(kg: CortexClient) -> None:
    a, b, c, d = await chain(kg, 4)
    link = await kg.call("POST", "/v1/links", {"src_id": a, "dst_id": d,
                                               "relation": "supersedes"})
    assert link.status == 201 and link.body["observed_by"] == "dev:tester"
    assert link.body["attest_level"] == "unsigned"
    q = await kg.call("POST", "/v1/kg/query", {"start_id": a, "depth": 2})
    assert {n["id"]: n["depth"] for n in q.body["nodes"]} == {a: 0, b: 1, c: 2, d: 1}
    only = await kg.call("POST", "/v1/kg/query", {"start_id": a, "depth": 5,
                                                  "relations": ["supersedes"]})
    assert {n["id"] for n in only.body["nodes"]} == {a, d}
    paths = await kg.call("POST", "/v1/kg/paths", {"src_id": a, "dst_id": d, "max_depth": 7})
    assert [p["hops"] for p in paths.body["paths"]] == [1, 3]
    timeline = await kg.call("GET", f"/v1/kg/timeline?memory_id={a}")
    assert len(timeline.body["links"]) == 2
    links = await kg.call("GET", f"/v1/memories/{a}/links")
    assert len(links.body["links"]) == 2


async def test_invalidate_closes_the_window_and_keeps_history(kg: CortexClient) -> None:
    a, b = await chain(kg, 2)
    link_id = (await kg.call("GET", f"/v1/memories/{a}/links")).body["links"][0]["id"]
    closed = await kg.call("POST", "/v1/kg/invalidate", {"link_id": link_id})
    assert closed.status == 200 and closed.body["valid_until"] is not None
    q = await kg.call("POST", "/v1/kg/query", {"start_id": a, "depth": 1})
    assert [n["id"] for n in q.body["nodes"]] == [a]
    past = await kg.call("POST", "/v1/kg/query", {"start_id": a, "depth": 1,
                                                  "valid_at": closed.body["valid_from"]})
    assert {n["id"] for n in past.body["nodes"]} == {a, b}
    again = await kg.call("POST", "/v1/kg/invalidate", {"link_id": link_id})
    assert again.status == 409
    history = await kg.call("GET", f"/v1/memories/{a}/links")
    assert len(history.body["links"]) == 1


async def test_deleted_memory_leaves_the_graph(kg: CortexClient) -> None:
    a, b, c = await chain(kg, 3)
    assert (await kg.call("DELETE", f"/v1/memories/{b}")).status == 200
    q = await kg.call("POST", "/v1/kg/query", {"start_id": a, "depth": 3})
    assert [n["id"] for n in q.body["nodes"]] == [a]
    paths = await kg.call("POST", "/v1/kg/paths", {"src_id": a, "dst_id": c, "max_depth": 3})
    assert paths.body["paths"] == []


async def test_bad_graph_input(kg: CortexClient) -> None:
    a, b = await chain(kg, 2)
    missing = "00000000-0000-4000-8000-000000000000"
    cases = [
        ("/v1/links", {"src_id": a, "dst_id": a, "relation": "related_to"}, 400),
        ("/v1/links", {"src_id": a, "dst_id": b, "relation": "related_to"}, 409),
        ("/v1/links", {"src_id": a, "dst_id": missing, "relation": "related_to"}, 404),
        ("/v1/links", {"src_id": a, "dst_id": b, "relation": "likes"}, 400),
        ("/v1/links", {"src_id": a, "dst_id": b, "relation": "Related To"}, 400),
        ("/v1/links", {"src_id": "nope", "dst_id": b, "relation": "related_to"}, 400),
        ("/v1/links", {"src_id": b, "dst_id": a, "relation": "x-cites",
                       "valid_from": "2026-01-02T00:00:00Z",
                       "valid_until": "2026-01-01T00:00:00Z"}, 400),
        ("/v1/links", {"src_id": b, "dst_id": a, "relation": "x-cites",
                       "valid_from": "2026-01-02T00:00:00"}, 400),
        ("/v1/kg/query", {"start_id": a, "depth": 0}, 400),
        ("/v1/kg/query", {"start_id": a, "depth": 6}, 400),
        ("/v1/kg/query", {"start_id": missing, "depth": 1}, 404),
        ("/v1/kg/paths", {"src_id": a, "dst_id": b, "max_depth": 8}, 400),
        ("/v1/kg/paths", {"src_id": a, "dst_id": missing, "max_depth": 2}, 404),
        ("/v1/kg/invalidate", {"link_id": missing}, 404),
    ]
    for path, body, status in cases:
        reply = await kg.call("POST", path, body)
        assert reply.status == status, (path, body, reply.text)
        assert reply.body["error"]["message"]
    assert (await kg.call("GET", "/v1/kg/timeline?memory_id=bad")).status == 400
    custom = await kg.call("POST", "/v1/links", {"src_id": b, "dst_id": a, "relation": "x-cites"})
    assert custom.status == 201
