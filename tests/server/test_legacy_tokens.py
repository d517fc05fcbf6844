"""Blind tokens in two forms (issue 27, ADR 0078) on a real server and PostgreSQL.

Sealed memories are keyed in 12 base64url characters since migration 0027; rows keyed
before it hold 24 hex characters (the legacy form) until the re-sealing worker re-keys them.

1. A database sealed by an older release (migrated to 0026, rows written with legacy
   tokens) migrates to 0027: its rows are labelled legacy, and recall finds them.
2. A cortex whose every memory holds legacy tokens: a server with ``at_rest`` off (the
   worker leaves memories alone) recalls the fixed query set exactly as before (same ids,
   same order); a server with it on re-keys them in small batches while stores and recalls
   go on: at every step the memories sampled are each found by their own word and every
   memory lists as stored; at the end every token is 12 characters, the query set answers
   as before, the deep audit matches every row and capabilities count no legacy row.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
from bench.qualityset import build
from psycopg.rows import dict_row

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.memory_sealing import MemorySeal
from attested_cortex.attest.sealing import Sealer
from attested_cortex.store.memory_ciphers import bind_cipher, legacy_tokens, plaintext
from attested_cortex.store.migrating import migrate
from attested_cortex.store.recall import recall
from tests.server.test_key_rotation import ring_dir
from tests.server.test_memory_encryption_at_rest import (
    NOTES,
    answer_as_before_and_audit,
    answers,
    differing,
    every_memory,
    store_notes,
    written,
)
from tests.support.cortex import CortexClient, MakeCortex

_VECTOR = ("SELECT (setweight(to_tsvector('english', %s), 'A') "
           "|| setweight(to_tsvector('english', %s), 'B'))::text")


def legacy_vector(conn: psycopg.Connection[Any], seal: MemorySeal, title: str,
                  content: str) -> str:
    """A memory's search vector as a release before migration 0027 keyed it (version 1)."""
    row = conn.execute(_VECTOR, (title, content)).fetchone()
    assert row is not None
    return seal.key_text(str(row[0]), 1, legacy=True)


def token_lengths(dsn: str) -> dict[int, int]:
    """Sealed rows' tokens by length."""
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute(
            "SELECT length(t), count(*) FROM memories, unnest(tsvector_to_array(search)) t"
            " WHERE key_version IS NOT NULL GROUP BY 1").fetchall())


async def test_rows_keyed_before_0027_are_labelled_and_found(pg15_dsn: str) -> None:
    key = mk.generate_key()
    seal = MemorySeal(Sealer(mk.KeyRing.single(key)))
    await migrate(pg15_dsn, target=26, graph=False)
    rows = {uuid.uuid4(): ("harbour pilots", "the pilot boards the tanker at dawn"),
            uuid.uuid4(): ("ledger", "the quarterly ledger closes on friday")}
    with psycopg.connect(pg15_dsn, autocommit=True) as conn:
        for row_id, (title, content) in rows.items():
            conn.execute(
                "INSERT INTO memories (id, namespace, title, content, author, key_version,"
                " sealed, search) VALUES (%s, 'kb', '', '', 'dev:old', 1, %s, %s::tsvector)",
                (row_id, seal.seal(row_id, plaintext(title, content, {})),
                 legacy_vector(conn, seal, title, content)))
    await migrate(pg15_dsn, graph=False)
    async with await psycopg.AsyncConnection.connect(
            pg15_dsn, autocommit=True, row_factory=dict_row) as conn:
        labels = await (await conn.execute("SELECT token_format, count(*) AS n FROM memories"
                                           " GROUP BY 1")).fetchall()
        assert labels == [{"token_format": 0, "n": 2}]
        bind_cipher(conn, seal)
        assert await legacy_tokens(conn)
        (pilot, ledger) = rows
        for query, wanted in (("pilot boards", [pilot]), ("quarterly ledger", [ledger]),
                              ("tanker", [pilot])):
            hits = await recall(conn, query=query, namespace=None, limit=5)
            assert [h.memory.id for h in hits] == wanted, query
            assert hits[0].memory.content == rows[wanted[0]][1]


async def _encryption(client: CortexClient) -> dict[str, Any]:
    return dict((await client.call("GET", "/v1/capabilities")).body["encryption"])


async def _found_by_code(client: CortexClient, code: str) -> list[str]:
    reply = await client.call("POST", "/v1/recall", {"query": code, "namespace": "kb"})
    assert reply.status == 200, reply.text
    return [r["id"] for r in reply.body["results"]]


async def test_legacy_rows_recalled_then_rekeyed_under_load(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    key = mk.generate_key()
    dsn = migrated_pg15_dsn
    memories, labelled = build(memories=300, lexical=25, paraphrase=10, seed=78)
    queries = [q.text for q in labelled]
    on = await make_cortex(dsn, migrated=False, master_key=ring_dir(tmp_path / "r1", {1: key}, 1),
                           encryption={"at_rest": True})
    batch = [{"namespace": "kb", "content": m.content, "title": f"entry code{i:03d}x",
              "metadata": {"n": i}} for i, m in enumerate(memories)]
    reply = await on.call("POST", "/v1/memories:batch", {"memories": batch})
    assert reply.status == 201, reply.text
    stored = written(reply.body["memories"], batch)
    ids = list(stored)
    note_ids, notes = await store_notes(on, "rekeying")  # rewritten during the re-keying
    stored |= notes
    assert token_lengths(dsn).keys() == {12}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    expected = await answers(on, queries)
    assert sum(len(a) for a in expected) > 5 * len(queries)  # not vacuous

    # every row's vector keyed as a release before 0027 keyed it (the trigger labels them)
    seal = MemorySeal(Sealer(mk.KeyRing.single(key)))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for row_id, (title, content, _) in stored.items():
            conn.execute("UPDATE memories SET search = %s::tsvector WHERE id = %s",
                         (legacy_vector(conn, seal, title, content), row_id))
        conn.execute("ANALYZE memories")
    assert token_lengths(dsn).keys() == {24}

    kept = await make_cortex(dsn, migrated=False,
                             master_key=ring_dir(tmp_path / "r1b", {1: key}, 1),
                             encryption={"at_rest": False})
    assert (await _encryption(kept))["memories_with_legacy_tokens"] == 300 + NOTES
    assert await answers(kept, queries) == expected

    rekeying = await make_cortex(dsn, migrated=False,
                                 master_key=ring_dir(tmp_path / "r1c", {1: key}, 1),
                                 encryption={"at_rest": True, "reseal_batch": 20,
                                             "reseal_pause_ms": 30})
    seen: list[int] = []
    while (left := (await _encryption(rekeying))["memories_with_legacy_tokens"]) > 0:
        seen.append(left)
        assert len(seen) < 400, f"re-keying did not finish: {left} left"
        for i in range(3 * len(seen), 3 * len(seen) + 3):  # a different three each step
            assert await _found_by_code(rekeying, f"code{i % 300:03d}x") == [ids[i % 300]], left
        if len(seen) <= NOTES:  # writes go on: a note rewritten in the same words (the
            # statistics the answers are ranked by stay the same)
            note = {"content": f"Rekeying note {len(seen)}!", "title": f"note {len(seen)}",
                    "metadata": {"step": len(seen), "rewritten": True}}
            reply = await rekeying.call("PATCH", f"/v1/memories/{note_ids[len(seen) - 1]}",
                                        note)
            assert reply.status == 200, reply.text
            stored |= written(reply.body, [note])
        assert differing(await every_memory(rekeying), stored) == {}, left
    assert any(0 < n < 300 for n in seen), seen  # observed mid-way
    assert token_lengths(dsn).keys() == {12}
    await answer_as_before_and_audit(rekeying, dsn, queries, expected)
    after = await make_cortex(dsn, migrated=False,
                              master_key=ring_dir(tmp_path / "r1d", {1: key}, 1),
                              encryption={"at_rest": True})
    assert await answers(after, queries) == expected  # no legacy form queried any more
