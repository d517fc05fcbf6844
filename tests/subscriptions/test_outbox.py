"""The event outbox (issue 41 item 1, ADR 0106) on a real server and PostgreSQL: every kind of
write appends its ``post_*`` event, with the payload a post- hook receives, in the write's own
transaction, with the times the API prints; a refused write appends none. About 1 s."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support.cortex import MakeCortex


def outbox(dsn: str) -> list[tuple[int, str, str, str | None, dict[str, Any]]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(r) for r in conn.execute(  # type: ignore[misc]
            "SELECT seq, event, key, namespace, payload FROM outbox_events ORDER BY seq")]


async def test_each_write_appends_its_post_event_and_a_refused_one_none(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts={"enabled": True})
    one = await cortex.store("team/a", "first")  # the one-statement store
    batch = await cortex.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "team/b", "content": "b1"}, {"namespace": "team/b", "content": "b2"}]})
    assert batch.status == 201, batch.text
    changed = await cortex.call("PATCH", f"/v1/memories/{one['id']}",
                                {"content": "second", "expected_revision": 1})
    assert changed.status == 200, changed.text
    stale = await cortex.call("PATCH", f"/v1/memories/{one['id']}",
                              {"content": "third", "expected_revision": 1})
    assert stale.status == 409, stale.text  # refused: no event
    two = batch.body["memories"][0]
    link = await cortex.call("POST", "/v1/links", {"src_id": one["id"], "dst_id": two["id"],
                                                   "relation": "related_to"})
    assert link.status == 201, link.text
    closed = await cortex.call("POST", "/v1/kg/invalidate", {"link_id": link.body["id"]})
    assert closed.status == 200, closed.text
    trail = await cortex.call("POST", "/v1/transcripts",
                              {"namespace": "team/a", "content": "user: hi"})
    assert trail.status == 201, trail.text
    gone = await cortex.call("DELETE", f"/v1/memories/{one['id']}")
    assert gone.status in (200, 204), gone.text

    rows = outbox(cortex.dsn)
    assert [(event, key) for _, event, key, _, _ in rows] == [
        ("post_store", f"memory:{one['id']}"),
        ("post_store", f"memory:{two['id']}"),
        ("post_store", f"memory:{batch.body['memories'][1]['id']}"),
        ("post_update", f"memory:{one['id']}"),
        ("post_link", f"link:{link.body['id']}"),
        ("post_invalidate", f"link:{link.body['id']}"),
        ("post_transcript_store", f"transcript:{trail.body['id']}"),
        ("post_delete", f"memory:{one['id']}"),
    ]
    payloads = [p for *_, p in rows]
    # exactly what the API answered (and a post_store hook gets), times printed alike: the
    # one-statement store renders its row's times in SQL, the other writes in Python
    assert payloads[0] == one
    assert payloads[3] == changed.body
    assert payloads[4] == link.body
    assert payloads[5] == closed.body
    assert payloads[6]["content"] == "user: hi" and payloads[7]["deleted"] is True
    assert [ns for _, _, _, ns, _ in rows] == [
        "team/a", "team/b", "team/b", "team/a", None, None, "team/a", "team/a"]

    # PostgreSQL cuts a fraction's trailing zeros (.15227), Python's isoformat keeps six
    # digits: store until a commit time ends in a zero (one in ten; bounded) and compare
    for index in range(300):
        zero = await cortex.store("team/z", f"z{index}")
        if zero["created_at"].split("+")[0][-1] == "0":
            break
    else:
        raise AssertionError("no commit time ending in a zero in 300 stores")
    assert outbox(cortex.dsn)[-1][4] == zero

