"""Recall and listing answers are bounded in bytes (issue 20, item 8): 25 memories of 250k
emoji were one 72 MiB recall answer, and four listings of 500 took 1 GiB. An answer now
stops at ``limits.max_answer_bytes``, says ``truncated``, and pages on: a listing with a
cursor over ``(created_at, id)`` that yields each memory exactly once while writes go on, a
recall with the ids of the ranked hits that did not fit."""

from __future__ import annotations

from typing import Any

from tests.support.cortex import CortexClient, MakeCortex

BUDGET = 4 * 1024 * 1024  # the default limits.max_answer_bytes
EMOJI = "😀" * 30_000  # 120 kB of UTF-8, 360 kB of JSON (\ud83d\ude00 each)
COUNT = 30  # about 10.8 MB of JSON together


async def bounded(make_cortex: MakeCortex, dsn: str) -> CortexClient:
    return await make_cortex(dsn, migrated=False)


async def store_many(client: CortexClient, count: int, tag: str) -> list[str]:
    return [(await client.store("big/notes", f"alpha {tag} {i} {EMOJI}"))["id"]
            for i in range(count)]


async def page(client: CortexClient, cursor: str | None) -> Any:
    path = "/v1/memories?namespace=big&limit=500"
    reply = await client.call("GET", path + (f"&cursor={cursor}" if cursor else ""))
    assert reply.status == 200, reply.text
    assert len(reply.text.encode()) <= BUDGET
    return reply.body


async def test_a_recall_answer_stops_at_the_byte_bound_and_names_the_rest(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await bounded(make_cortex, migrated_pg15_dsn)
    stored = await store_many(client, COUNT, "recall")
    reply = await client.call("POST", "/v1/recall", {"query": "alpha", "limit": 100})
    assert reply.status == 200 and len(reply.text.encode()) <= BUDGET
    body = reply.body
    shown = [r["id"] for r in body["results"]]
    assert body["truncated"] is True and shown and body["omitted_ids"]
    assert sorted(shown + body["omitted_ids"]) == sorted(stored)
    one = await client.call("GET", f"/v1/memories/{body['omitted_ids'][0]}")
    assert one.status == 200 and one.body["content"].endswith(EMOJI)


async def test_a_listing_pages_on_by_cursor_each_memory_once_while_writes_go_on(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await bounded(make_cortex, migrated_pg15_dsn)
    stored = await store_many(client, COUNT, "list")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        body = await page(client, cursor)
        pages += 1
        seen += [m["id"] for m in body["memories"]]
        if body["next"] is None:
            assert body["truncated"] is False
            break
        assert body["truncated"] is True and body["memories"]
        cursor = body["next"]
        # writes during the walk: a new memory, and an edit of one not listed yet
        await client.store("big/notes", f"alpha written meanwhile {pages}")
        pending = [i for i in stored if i not in seen]
        if pending:
            edited = await client.call("PATCH", f"/v1/memories/{pending[-1]}",
                                       {"title": f"edited {pages}"})
            assert edited.status == 200, edited.text
    assert pages > 2
    assert sorted(seen) == sorted(stored) and len(seen) == len(set(seen))


async def test_the_bound_is_a_setting_and_capabilities_report_it(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               limits={"max_answer_bytes": 512 * 1024})
    await store_many(client, 3, "small")
    caps = await client.call("GET", "/v1/capabilities")
    assert caps.body["limits"]["max_answer_bytes"] == 512 * 1024
    reply = await client.call("POST", "/v1/recall", {"query": "alpha"})
    assert len(reply.text.encode()) <= 512 * 1024 and len(reply.body["omitted_ids"]) == 2


async def test_a_cursor_the_server_did_not_give_is_400(cortex: CortexClient) -> None:
    reply = await cortex.call("GET", "/v1/memories?cursor=bm90LWEtY3Vyc29y")
    assert (reply.status, reply.body["error"]["code"]) == (400, "bad_cursor")


async def test_a_memorys_links_page_on_by_cursor_each_link_once(cortex: CortexClient) -> None:
    hub = await cortex.store("team", "hub")

    async def link_to_new(i: int) -> str:
        other = await cortex.store("team", f"spoke {i}")
        reply = await cortex.call("POST", "/v1/links", {
            "src_id": hub["id"], "dst_id": other["id"], "relation": "related_to"})
        assert reply.status == 201, reply.text
        return str(reply.body["id"])

    made = [await link_to_new(i) for i in range(25)]
    seen: list[str] = []
    cursor = ""
    while True:
        reply = await cortex.call("GET", f"/v1/memories/{hub['id']}/links?limit=10{cursor}")
        assert reply.status == 200, reply.text
        seen += [link["id"] for link in reply.body["links"]]
        if reply.body["next"] is None:
            break
        assert reply.body["truncated"] is True and len(reply.body["links"]) == 10
        cursor = f"&cursor={reply.body['next']}"
        made.append(await link_to_new(len(made)))  # a link made during the walk comes last
    assert seen == made  # oldest first, each exactly once
