"""Memories encrypted at rest (issue 27 part 3, ADR 0056 item 5, ADR 0065) on a real server
and PostgreSQL.

1. Stored one by one, in a batch and by an update, with ``encryption.at_rest`` on and off:
   get, list and recall answer the text both times; a ``pg_dump`` and a raw scan of the
   database's files and WAL after a CHECKPOINT hold the title, content and metadata only
   with encryption off (the test fails when sealing stops); a server without the key reads
   the rows as unreadable.
2. Recall over keyed tokens answers as over lexemes: a fixed query set over the labelled
   quality set recalled with encryption off, then again once the re-sealing worker has
   sealed every row, then again after a rotation to a new key version that ran under
   stores and recalls (every memory readable at every moment): the same ids in the same
   order each time; at every step of the rotation every memory stored so far lists with the
   title, content and metadata it was stored with (one listing of all); the deep audit
   matches every row; a ring of the new version alone reads everything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from bench.qualityset import build
from hack.support.pgservers import PgServer
from hack.support.waiting import Pending, await_until

from attested_cortex.attest import masterkeys as mk
from attested_cortex.cli import audit as audit_cli
from tests.server.test_encryption_at_rest import at_rest, marker
from tests.server.test_key_rotation import ring_dir
from tests.support.cortex import CortexClient, MakeCortex


async def texts_of(client: CortexClient, memory_id: str) -> tuple[str, str, Any]:
    reply = await client.call("GET", f"/v1/memories/{memory_id}")
    assert reply.status == 200, reply.text
    return reply.body["title"], reply.body["content"], reply.body["metadata"]


@pytest.mark.parametrize("sealed", [True, False], ids=["on", "off"])
async def test_no_memory_text_at_rest_with_encryption_on(
        make_cortex: MakeCortex, pg15_server: PgServer, migrated_pg15_dsn: str,
        tmp_path: Path, sealed: bool) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    dsn = migrated_pg15_dsn
    client = await make_cortex(dsn, migrated=False, master_key={"file": key},
                               encryption={"at_rest": sealed})
    title, text, note, batched, changed, keyed, keyed_batch = (marker() for _ in range(7))
    one = await client.store("kb/a", f"{text} about the harbour", title=title,
                             metadata={"note": note}, tags=["harbour"])
    reply = await client.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "kb/a", "content": f"{batched} about the lighthouse", "title": "Ünï",
         "metadata": {"z": [1, 2.5, None, {"y": "é", "b": True}], "a": 1e-7}}]})
    assert reply.status == 201, reply.text
    (two,) = reply.body["memories"]
    # a sealed batch answers from the request it sealed, not the rows read back: the same
    # bytes a later read opens (key order and numbers included)
    later = await client.call("GET", f"/v1/memories/{two['id']}")
    assert json.dumps(later.body) == json.dumps(two)
    three = await client.store("kb/a", "first words")
    # keyed writes: their kept answers hold the memories' text (issue 27 item 2)
    reply = await client.call("POST", "/v1/memories", {"namespace": "keyed", "content": keyed},
                              headers={"Idempotency-Key": "one"})
    assert reply.status == 201, reply.text
    again = await client.call("POST", "/v1/memories", {"namespace": "keyed", "content": keyed},
                              headers={"Idempotency-Key": "one"})
    assert again.status == 201 and again.body == reply.body  # answered from the kept answer
    reply = await client.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "keyed", "content": keyed_batch}]}, headers={"Idempotency-Key": "two"})
    assert reply.status == 201, reply.text
    reply = await client.call("PATCH", f"/v1/memories/{three['id']}",
                              {"content": f"{changed} about the ferry"})
    assert reply.status == 200, reply.text

    assert await texts_of(client, one["id"]) == (title, f"{text} about the harbour",
                                                 {"note": note})
    listed = (await client.call("GET", "/v1/memories?namespace=kb")).body["memories"]
    assert {m["content"] for m in listed} == {
        f"{text} about the harbour", f"{batched} about the lighthouse",
        f"{changed} about the ferry"}
    for query, wanted in (("harbour", one), ("lighthouse", two), ("ferry", three)):
        found = (await client.call("POST", "/v1/recall", {"query": query})).body["results"]
        assert [r["id"] for r in found] == [wanted["id"]], query
    with psycopg.connect(dsn) as conn:
        versions = conn.execute("SELECT key_version FROM memories").fetchall()
    assert versions == [(1 if sealed else None,)] * 5
    caps = (await client.call("GET", "/v1/capabilities")).body["encryption"]
    assert caps["memories_by_key_version"] == ({"v1": 5} if sealed else {"plain": 5})
    report = (await client.call("GET", "/v1/audit/verify?deep=true")).body
    assert report["ok"] and report["deep"]["mismatch_count"] == 0, report

    dumped, files = at_rest(pg15_server, dsn)
    for secret in (title, text, note, batched, changed, keyed, keyed_batch):
        assert (secret in dumped) is not sealed, secret
        assert (secret.encode() in files) is not sealed, secret

    if sealed:  # without the key: unreadable, and the deep audit still matches every row
        # (a server without the cortex's key refuses to start: tests/server/test_key_checks)
        other = await make_cortex(dsn, migrated=False, master_key=ring_dir(  # v1 not held
            tmp_path / "other", {2: mk.generate_key()}, 2), encryption={"at_rest": True})
        assert await texts_of(other, one["id"]) == ("", "", {})
        listed = (await other.call("GET", "/v1/memories?limit=500")).body["memories"]
        assert listed and all(m.get("unreadable") is True for m in listed), listed
        readable = (await client.call("GET", f"/v1/memories/{one['id']}")).body
        assert "unreadable" not in readable, readable  # absent when it opens
        keyless, swept, _ = await audit_cli._verify(dsn, None, None, wait_seconds=5, deep=True)
        assert keyless.ok and swept is not None and swept["mismatch_count"] == 0, swept

QUERIES = 40
#: Memories stored while the worker re-seals: a fixed number, not one per step of a loop whose
#: length depends on the machine's speed (BM25's statistics count them: ADR 0093).
NOTES = 3


async def answers(client: CortexClient, queries: list[str]) -> list[list[str]]:
    async def one(query: str) -> list[str]:
        reply = await client.call("POST", "/v1/recall",
                                  {"query": query, "namespace": "kb", "limit": 10})
        assert reply.status == 200, reply.text
        return [r["id"] for r in reply.body["results"]]

    return [await one(q) for q in queries]


Texts = dict[str, tuple[str, str, Any]]


def written(reply: Any, fields: list[dict[str, Any]]) -> Texts:
    """Title, content and metadata of each memory a write answered, as the request gave them."""
    ids = [m["id"] for m in reply] if isinstance(reply, list) else [reply["id"]]
    return {i: (f.get("title", ""), f["content"], f.get("metadata", {}))
            for i, f in zip(ids, fields, strict=True)}


async def store_notes(client: CortexClient, word: str) -> tuple[list[str], Texts]:
    """Stores the :data:`NOTES` notes a test rewrites while its keys change, before it takes
    the answers it compares: recall ranks by statistics every row is part of (ADR 0093,
    0137), so both answers must be of the same rows. Their ids, and their texts as given."""
    notes = [{"namespace": "load/a", "content": f"{word} note {i}", "title": f"note {i}",
              "metadata": {"step": i}} for i in range(1, NOTES + 1)]
    reply = await client.call("POST", "/v1/memories:batch", {"memories": notes})
    assert reply.status == 201, reply.text
    return [m["id"] for m in reply.body["memories"]], written(reply.body["memories"], notes)


async def every_memory(client: CortexClient) -> Texts:
    """Title, content and metadata of every live memory, by id: the listing opens them all
    (one page of up to 500; more pages after its cursor)."""
    found: Texts = {}
    path = "/v1/memories?limit=500"
    while True:
        reply = await client.call("GET", path)
        assert reply.status == 200, reply.text
        found |= {m["id"]: (m["title"], m["content"], m["metadata"])
                  for m in reply.body["memories"]}
        if not reply.body["truncated"]:
            return found
        path = f"/v1/memories?limit=500&cursor={reply.body['next']}"


def differing(found: Texts, stored: Texts) -> dict[str, Any]:
    """The memories that do not read back as stored (none, when all do)."""
    return {i: found.get(i) for i, texts in stored.items() if found.get(i) != texts}


async def counts(client: CortexClient) -> dict[str, int]:
    caps = (await client.call("GET", "/v1/capabilities")).body["encryption"]
    return dict(caps["memories_by_key_version"])


async def test_recall_and_rotation_answer_as_plain(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    v1, v2 = mk.generate_key(), mk.generate_key()
    dsn = migrated_pg15_dsn
    memories, labelled = build(memories=300, lexical=25, paraphrase=10, seed=27)
    queries = [q.text for q in labelled] + [
        '"rotates the certificates"', "doctor -monday", "the lawyer's invoices", "O'Brien"]
    plain = await make_cortex(dsn, migrated=False,
                              master_key=ring_dir(tmp_path / "r1", {1: v1}, 1))
    batch = [{"namespace": "kb", "content": m.content, "title": f"entry {i}",
              "metadata": {"n": i, "tags": ["é", None]}} for i, m in enumerate(memories)]
    reply = await plain.call("POST", "/v1/memories:batch", {"memories": batch})
    assert reply.status == 201, reply.text
    stored = written(reply.body["memories"], batch)
    note_ids, notes = await store_notes(plain, "rotating")  # rewritten during the rotation
    stored |= notes
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    expected = await answers(plain, queries)
    assert sum(len(a) for a in expected) > 5 * len(queries)  # not vacuous

    sealing = await make_cortex(dsn, migrated=False,
                                master_key=ring_dir(tmp_path / "r1b", {1: v1}, 1),
                                encryption={"at_rest": True, "reseal_batch": 100})
    await await_until(lambda: _only(sealing, "v1"), what="every memory sealed under v1",
                      seconds=60, interval_s=0.1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    assert await answers(sealing, queries) == expected

    rotated = await make_cortex(dsn, migrated=False,
                                master_key=ring_dir(tmp_path / "r2", {1: v1, 2: v2}, 2),
                                encryption={"at_rest": True, "reseal_batch": 20,
                                            "reseal_pause_ms": 30})
    seen: list[dict[str, int]] = []
    while (now := await counts(rotated)).keys() != {"v2"}:
        seen.append(now)
        assert len(seen) < 400, f"rotation did not finish: {now}"
        if len(seen) <= NOTES:  # writes go on, under v2: a note rewritten in the same
            # words (the statistics the answers are ranked by stay the same)
            note = {"content": f"Rotating note {len(seen)}!", "title": f"note {len(seen)}",
                    "metadata": {"step": len(seen), "rewritten": True}}
            reply = await rotated.call("PATCH", f"/v1/memories/{note_ids[len(seen) - 1]}",
                                       note)
            assert reply.status == 200, reply.text
            stored |= written(reply.body, [note])
        # every row, at every step, opened by one listing while the worker re-seals
        assert differing(await every_memory(rotated), stored) == {}, now
        found = (await rotated.call("POST", "/v1/recall", {"query": queries[0]})).body
        assert found["results"], now
    assert any("v1" in c and "v2" in c for c in seen), seen  # observed mid-way, under load
    await answer_as_before_and_audit(rotated, dsn, queries, expected)

    retired = await make_cortex(dsn, migrated=False,
                                master_key=ring_dir(tmp_path / "r3", {2: v2}, 2),
                                encryption={"at_rest": True})
    assert await answers(retired, queries) == expected
    assert differing(await every_memory(retired), stored) == {}


async def answer_as_before_and_audit(client: CortexClient, dsn: str, queries: list[str],
                                     expected: list[list[str]]) -> None:
    """Once the worker is done: the query set answers as ``expected`` (statistics renewed:
    the tokens changed) and the deep audit matches every row."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    assert await answers(client, queries) == expected
    report = (await client.call("GET", "/v1/audit/verify?deep=true")).body
    assert report["ok"] and report["deep"]["mismatch_count"] == 0, report


async def _only(client: CortexClient, version: str) -> bool | Pending:
    now = await counts(client)
    return now.keys() == {version} or Pending(now)


async def test_sealed_then_switched_off_is_still_recalled(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Memories sealed with encryption on, then served with it off (the key kept): recall
    finds them by their words (their tokens are keyed), beside plain ones stored since."""
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    dsn = migrated_pg15_dsn
    on = await make_cortex(dsn, migrated=False, master_key={"file": key},
                           encryption={"at_rest": True})
    sealed = await on.store("kb", "the harbour pilot boards at dawn", title="pilots")
    off = await make_cortex(dsn, migrated=False, master_key={"file": key},
                            encryption={"at_rest": False})
    plain = await off.store("kb", "the harbour master signs the manifest")
    for query, wanted in (("pilot boards", [sealed]), ("harbour", [plain, sealed]),
                          ("pilots", [sealed])):
        found = (await off.call("POST", "/v1/recall", {"query": query})).body["results"]
        assert sorted(r["id"] for r in found) == sorted(w["id"] for w in wanted), query
    assert await texts_of(off, sealed["id"]) == ("pilots", "the harbour pilot boards at dawn",
                                                 {})
    assert await counts(off) == {"plain": 1, "v1": 1}  # nothing unsealed, nothing lost


async def test_a_kept_answer_outlives_its_key_version(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """A keyed write's answer is kept sealed (no text in the row); once the ring has rotated
    and dropped that version, a retry is answered from the memory (re-sealed meanwhile by
    the worker) and the answer is kept again under the current version."""
    v1, v2 = mk.generate_key(), mk.generate_key()
    dsn = migrated_pg15_dsn
    first = await make_cortex(dsn, migrated=False, master_key=ring_dir(tmp_path / "r1", {1: v1}, 1),
                              encryption={"at_rest": True})
    body = {"namespace": "kb", "content": "the harbour pilot boards at dawn"}
    key = {"Idempotency-Key": "pilot"}
    stored = await first.call("POST", "/v1/memories", body, headers=key)
    assert stored.status == 201, stored.text

    def kept() -> tuple[Any, ...] | None:
        with psycopg.connect(dsn) as conn:
            return conn.execute("SELECT answer, key_version, sealed IS NOT NULL"
                                " FROM idempotency_keys").fetchone()

    assert kept() == (None, 1, True)
    rotated = await make_cortex(dsn, migrated=False,
                                master_key=ring_dir(tmp_path / "r2", {1: v1, 2: v2}, 2),
                                encryption={"at_rest": True})
    await await_until(lambda: _only(rotated, "v2"), what="the memory re-sealed under v2",
                      seconds=30, interval_s=0.05)
    retired = await make_cortex(dsn, migrated=False,
                                master_key=ring_dir(tmp_path / "r3", {2: v2}, 2),
                                encryption={"at_rest": True})
    again = await retired.call("POST", "/v1/memories", body, headers=key)
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.body == stored.body
    assert kept() == (None, 2, True)
    assert (await retired.call("POST", "/v1/memories", body, headers=key)).body == stored.body
