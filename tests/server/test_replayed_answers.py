"""Every kind of keyed write's answer replays (issue 43 item 10, ADR 0030): the answer
rebuilt from what the write wrote when it was never kept (the connection dropped after the
COMMIT) is, byte for byte, the HTTP body the first request got; the kept answer is the same
JSON (PostgreSQL's jsonb keeps an object's keys in its own order, not the encoder's). One
server, one database, a write of each kind (memory store, update and delete; a batch; a link
and its invalidation; a transcript): about a second; the walk of a keyed store, traced: half
a second."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import psycopg

from attested_cortex.server.routes import memories as memory_routes
from attested_cortex.service import resources
from attested_cortex.service.resources.idempotency import AnswerKind
from tests.support.cortex import CortexClient, MakeCortex, Reply
from tests.support.walks import traced

#: The answer kinds the writes below replay: a kind declared and not replayed here fails.
REPLAYED = {"memory", "memories", "link", "transcript"}


def declared_kinds() -> set[str]:
    """The names of the answer kinds the resource modules declare."""
    found = set()
    for info in pkgutil.walk_packages(resources.__path__, resources.__name__ + "."):
        module = importlib.import_module(info.name)
        found |= {v.name for v in vars(module).values() if isinstance(v, AnswerKind)}
    return found


TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "chat/**", "retention_days": 1}]}


async def _replays(client: CortexClient, method: str, path: str, body: Any,
                   key: str) -> Reply:
    """The first answer, after checking that the kept and the rebuilt replay are it."""
    headers = {"Idempotency-Key": key}
    first = await client.call(method, path, body, headers=headers)
    assert first.status in (200, 201), first.text
    kept = await client.call(method, path, body, headers=headers)
    with psycopg.connect(client.dsn, autocommit=True) as conn:  # the answer was never kept
        conn.execute("UPDATE idempotency_keys SET answer = NULL, status = NULL, sealed = NULL,"
                     " key_version = NULL WHERE key = %s", (key,))
    rebuilt = await client.call(method, path, body, headers=headers)
    for again in (kept, rebuilt):
        assert again.headers["Idempotent-Replayed"] == "true", key
        assert (again.status, again.body) == (first.status, first.body), key
    assert rebuilt.text == first.text, key
    return first


async def test_each_answer_kind_replays_the_first_body(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS)
    assert declared_kinds() == REPLAYED
    a = (await _replays(client, "POST", "/v1/memories",
                        {"namespace": "kb", "content": "a", "tags": ["t"],
                         "metadata": {"zz": 1, "a": {"y": 2, "b": None}}}, "memory")).body
    b = await client.store("kb", "b")
    await _replays(client, "PATCH", f"/v1/memories/{a['id']}", {"content": "a2"}, "update")
    batch = {"memories": [{"namespace": "kb", "content": c} for c in ("c", "d")]}
    await _replays(client, "POST", "/v1/memories:batch", batch, "memories")
    link = (await _replays(client, "POST", "/v1/links", {
        "src_id": a["id"], "dst_id": b["id"], "relation": "related_to"}, "link")).body
    await _replays(client, "POST", "/v1/kg/invalidate", {"link_id": link["id"]}, "invalidate")
    await _replays(client, "POST", "/v1/transcripts",
                   {"namespace": "chat/1", "content": "user: hi\nagent: hello\n"}, "transcript")
    await _replays(client, "DELETE", f"/v1/memories/{b['id']}", None, "delete")


async def test_a_keyed_store_never_calls_back_into_the_server(cortex: CortexClient) -> None:
    """Issue 43 item 10: the idempotency module called the route's ``write`` closure for the
    first answer (a climb from the service back into the server); a route now hands it the
    service write and the answer kind, so neither a first, a kept nor a rebuilt answer calls
    up into ``server/`` (tests/support/walks.py counts the walk; docs/ARCHITECTURE.md)."""
    body, headers = {"namespace": "kb", "content": "walked"}, {"Idempotency-Key": "walk"}
    for lose in (False, False, True):
        if lose:
            with psycopg.connect(cortex.dsn, autocommit=True) as conn:
                conn.execute("UPDATE idempotency_keys SET answer = NULL, status = NULL")
        with traced(memory_routes.store_memory) as walk:
            reply = await cortex.call("POST", "/v1/memories", body, headers=headers)
        assert reply.status == 201, reply.text
        assert "attested_cortex.service.resources.idempotency" in walk.modules
        into_server = [c for c in walk.climbs if c[1].startswith("attested_cortex.server.")]
        assert not into_server, walk.summary()
