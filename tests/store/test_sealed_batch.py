"""A sealed batch's two ways in (issue 27, ADR 0065): the binary COPY of a UTF-8 connection
and the text COPY of any other client encoding answer what their rows read back opened,
and store the same keyed vector for the same text (so recall finds either)."""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import dict_row

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.memory_sealing import MemorySeal
from attested_cortex.attest.sealing import Sealer
from attested_cortex.store.memories import NewMemory, get_many, insert_many
from attested_cortex.store.memory_ciphers import bind_cipher
from attested_cortex.store.migrating import migrate
from attested_cortex.store.written import WrittenBy


async def test_both_copies_answer_as_read_back_and_key_alike(pg15_dsn: str) -> None:
    await migrate(pg15_dsn, graph=False)
    seal = MemorySeal(Sealer(mk.KeyRing.single(bytes(range(32)))))
    vectors = {}
    for encoding in ("UTF8", "LATIN1"):
        async with await psycopg.AsyncConnection.connect(
                pg15_dsn, autocommit=True, row_factory=dict_row) as conn:
            await conn.execute(f"SET client_encoding TO '{encoding}'")
            bind_cipher(conn, seal)
            batch = [NewMemory(uuid.uuid4(), "kb/a", "Ünï title", "the café's \\ lighthouse "
                               + "keeper " * 40, ["t,1", "NULL", '"q"', ""], {"k": [1, "é"]}),
                     NewMemory(uuid.uuid4(), "kb/b", "", "", [], {})]
            async with conn.transaction():
                written = await insert_many(conn, batch, author="dev:a",
                                            by=WrittenBy("Trusted", ("memory.read",)))
            assert written == await get_many(conn, [m.id for m in batch])
            assert [m.key_version for m in written] == [1, 1]
            cur = await conn.execute(
                "SELECT search::text AS v, title, content, metadata FROM memories "
                "WHERE id = %s", (batch[0].id,))
            row = await cur.fetchone()
            assert row is not None and (row["title"], row["content"], row["metadata"]) == (
                "", "", {})
            vectors[encoding] = row["v"]
    assert vectors["UTF8"] == vectors["LATIN1"]
    assert "keeper" not in vectors["UTF8"] and "lighthous" not in vectors["UTF8"]
