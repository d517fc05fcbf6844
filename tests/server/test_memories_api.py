"""Memories over HTTP: store, read, update, delete (tombstone), list."""

from tests.support.cortex import CortexClient


async def test_store_then_read(cortex: CortexClient) -> None:
    stored = await cortex.store("org/team", "the deploy key rotates monthly", title="keys",
                                tags=["ops"], metadata={"source": "runbook"})
    assert stored["author"] == "dev:tester" and stored["revision"] == 1
    got = await cortex.call("GET", f"/v1/memories/{stored['id']}")
    assert got.status == 200 and got.body == stored


async def test_update_bumps_revision_and_checks_expected_revision(cortex: CortexClient) -> None:
    stored = await cortex.store(content="v1")
    path = f"/v1/memories/{stored['id']}"
    updated = await cortex.call("PATCH", path, {"content": "v2", "expected_revision": 1})
    assert updated.status == 200 and updated.body["revision"] == 2
    assert updated.body["content"] == "v2" and updated.body["title"] == stored["title"]
    stale = await cortex.call("PATCH", path, {"content": "v3", "expected_revision": 1})
    assert stale.status == 409 and stale.body["error"]["code"] == "conflict"
    assert (await cortex.call("GET", path)).body["content"] == "v2"


async def test_delete_tombstones_and_keeps_the_row(cortex: CortexClient) -> None:
    stored = await cortex.store(content="secret plan")
    path = f"/v1/memories/{stored['id']}"
    deleted = await cortex.call("DELETE", path)
    assert deleted.status == 200 and deleted.body["deleted"] is True
    assert deleted.body["content"] == ""
    after = await cortex.call("GET", path)
    assert after.status == 200 and after.body["deleted"] and after.body["content"] == ""
    again = await cortex.call("DELETE", path)
    assert again.status == 200 and again.body["revision"] == deleted.body["revision"]
    patch = await cortex.call("PATCH", path, {"content": "back"})
    assert patch.status == 409
    recall = await cortex.call("POST", "/v1/recall", {"query": "secret plan"})
    assert recall.body["results"] == []


async def test_unknown_id_is_404(cortex: CortexClient) -> None:
    missing = "/v1/memories/00000000-0000-4000-8000-000000000000"
    for method, body in (("GET", None), ("PATCH", {"content": "x"}), ("DELETE", None)):
        reply = await cortex.call(method, missing, body)
        assert reply.status == 404 and reply.body["error"]["code"] == "not_found"


async def test_list_namespace_subtree_newest_first(cortex: CortexClient) -> None:
    a = await cortex.store("org/a", "one")
    b = await cortex.store("org/a/b", "two")
    await cortex.store("other", "three")
    reply = await cortex.call("GET", "/v1/memories?namespace=org/a")
    assert [m["id"] for m in reply.body["memories"]] == [b["id"], a["id"]]
