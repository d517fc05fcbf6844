"""No write launders a change made behind the server (issue 20, item 12, every writer of
records): an update or delete of a memory, or the invalidation of a link, whose row was
changed in SQL used to append a record built from the altered row, and the deep audit then
found nothing. Such a write is now 409 ``changed_behind_the_server``, writes nothing, and
the deep audit keeps naming the row; untouched rows are written as before."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support.cortex import CortexClient


def sql(client: CortexClient, statement: str, *params: Any) -> None:
    with psycopg.connect(client.dsn) as conn:
        conn.execute(statement, params)


async def named(client: CortexClient) -> set[str]:
    reply = await client.call("GET", "/v1/audit/verify?deep=true")
    return {m["id"] for m in reply.body["deep"]["mismatches"]}


async def test_updates_deletes_and_invalidations_of_tampered_rows_are_refused(
    cortex: CortexClient,
) -> None:
    moved = await cortex.store("team/a", "moved behind the server")
    stolen = await cortex.store("team/a", "author changed behind the server")
    clean = await cortex.store("team/a", "untouched")
    link = await cortex.call("POST", "/v1/links", {"src_id": clean["id"], "dst_id": moved["id"],
                                                   "relation": "related_to"})
    sql(cortex, "UPDATE memories SET namespace = 'team/b' WHERE id = %s", moved["id"])
    sql(cortex, "UPDATE memories SET author = 'dev:mallory' WHERE id = %s", stolen["id"])
    sql(cortex, "UPDATE links SET relation = 'supersedes' WHERE id = %s", link.body["id"])
    before = await named(cortex)
    assert before == {moved["id"], stolen["id"], link.body["id"]}

    update = await cortex.call("PATCH", f"/v1/memories/{moved['id']}", {"title": "launder"})
    delete = await cortex.call("DELETE", f"/v1/memories/{stolen['id']}", agent="dev:mallory")
    invalidate = await cortex.call("POST", "/v1/kg/invalidate", {"link_id": link.body["id"]})
    for reply in (update, delete, invalidate):
        assert (reply.status, reply.body["error"]["code"]) == (
            409, "changed_behind_the_server"), reply.text
    assert await named(cortex) == before  # still named: nothing was laundered
    fine = await cortex.call("PATCH", f"/v1/memories/{clean['id']}", {"title": "fine"})
    assert fine.status == 200 and (await cortex.call(
        "DELETE", f"/v1/memories/{clean['id']}")).status == 200
