"""Blind full-text tokens (ADR 0056) on real PostgreSQL: a keyed tsvector column answers the
recall's full-text scoring exactly as the plain one.

The labelled recall set (bench/qualityset.py, 400 memories, its 60 lexical and 40
paraphrase queries) plus phrase and negation queries: each memory's lexemes and positions
come from PostgreSQL (``to_tsvector``), are keyed in Python (:mod:`attested_cortex.attest.
blinding`) and cast back; each query's ``websearch_to_tsquery`` and its OR relaxation are
keyed alike. The scoring is store/recall.py's BM25 ingredients (rarity weights from
``pg_stats``, each lexeme's occurrences read back from ``ts_rank`` and its presence in the
title, docs/adr/0093) over the AND candidates, relaxed to OR when too few. Same ids, same
order, same scores for every query; and no lexeme is left in the keyed column's text.
"""

from __future__ import annotations

from typing import Any

import psycopg
from bench.qualityset import build
from psycopg import sql

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.blinding import key_tsquery, key_tsvector, token

KEY = mk.derive_subkey(bytes(range(32)), "memory")
EXTRA = ('"rotates the certificates"', "doctor -monday", "the lawyer's invoices", "O'Brien")

SCORE = """
WITH q AS (SELECT {and_q}::tsquery AS a, {or_q}::tsquery AS o),
st AS (SELECT s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs
       FROM pg_stats s WHERE s.tablename = 'docs' AND s.attname = {col_name} LIMIT 1),
lex AS MATERIALIZED (
    SELECT l.lexeme, ln(1.0 / greatest(coalesce(st.freqs[array_position(st.elems, l.lexeme)],
           st.freqs[cardinality(st.elems) + 1] / 2, 0.01), 1e-9))::float8 AS idf,
           ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery
               AS tq,
           ('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || ''':A')::tsquery
               AS ta
    FROM unnest({lexemes}::text[]) AS l(lexeme) LEFT JOIN st ON true),
and_c AS (SELECT d.id FROM docs d, q WHERE d.{col} @@ q.a ORDER BY d.id LIMIT 200),
or_c AS (SELECT d.id FROM docs d, q WHERE (SELECT count(*) FROM and_c) < 10
         AND d.{col} @@ q.o ORDER BY d.id LIMIT 200)
SELECT d.id, coalesce((SELECT sum(lex.idf * (round(1 / greatest(1.6449340668 * (
                 1 - ts_rank('{{1,1,1,1}}', d.{col}, lex.tq)), 1 / 300.0) - 0.5)
                 + 1.5 * (d.{col} @@ lex.ta)::int))
             FROM lex WHERE d.{col} @@ lex.tq), 0)::float8 AS fts
FROM (SELECT id FROM and_c UNION SELECT id FROM or_c) c JOIN docs d USING (id)
ORDER BY fts DESC, id LIMIT 10
"""


def answers(conn: psycopg.Connection[Any], col: str, query: str,
            ) -> list[tuple[int, float]]:
    forms = conn.execute(
        "SELECT websearch_to_tsquery('english', %(q)s)::text, coalesce(nullif(replace("
        "plainto_tsquery('english', %(q)s)::text, ' & ', ' | '), ''), "
        "websearch_to_tsquery('english', %(q)s)::text), "
        "array(SELECT lexeme FROM unnest(to_tsvector('english', %(q)s)))", {"q": query}
    ).fetchone()
    assert forms is not None
    and_q, or_q, lexemes = forms
    if col == "keyed":
        and_q, or_q = key_tsquery(and_q, KEY), key_tsquery(or_q, KEY)
        lexemes = [token(KEY, lexeme) for lexeme in lexemes]
    statement = sql.SQL(SCORE).format(
        and_q=sql.Literal(and_q), or_q=sql.Literal(or_q), lexemes=sql.Literal(lexemes),
        col=sql.Identifier(col), col_name=sql.Literal(col))
    return [(r[0], r[1]) for r in conn.execute(statement).fetchall()]


def test_keyed_tokens_recall_what_lexemes_recall(pg15_dsn: str) -> None:
    memories, queries = build(memories=400, lexical=60, paraphrase=40, seed=27)
    with psycopg.connect(pg15_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE docs (id int PRIMARY KEY, plain tsvector, keyed tsvector)")
        for m in memories:
            title = m.content.split(" ", 3)[1]  # a title of weight A, as memories have
            row = conn.execute(
                "SELECT (setweight(to_tsvector('english', %s), 'A') "
                "|| setweight(to_tsvector('english', %s), 'B'))::text", (title, m.content)
            ).fetchone()
            assert row is not None
            conn.execute("INSERT INTO docs VALUES (%s, %s::tsvector, %s::tsvector)",
                         (m.key, row[0], key_tsvector(row[0], KEY)))
        conn.execute("ANALYZE docs")
        texts = [q.text for q in queries] + list(EXTRA)
        plain = {t: answers(conn, "plain", t) for t in texts}
        keyed = {t: answers(conn, "keyed", t) for t in texts}
        assert keyed == plain
        # not vacuous: every lexical query finds its memory (paraphrases share no word by
        # design and may find nothing), and answers hold several ranked results
        assert all(q.target in [i for i, _ in plain[q.text]]
                   for q in queries if q.kind == "lexical")
        assert sum(len(found) for found in plain.values()) > 5 * len(texts)
        stats = conn.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'docs' "
                             "AND most_common_elems IS NOT NULL").fetchone()
        assert stats == (2,)  # the rarity weights came from real statistics, both columns
        left = conn.execute("SELECT string_agg(keyed::text, ' ') FROM docs").fetchone()
    assert left is not None
    for word in ("doctor", "lawyer", "certif", "rotat"):
        assert word not in left[0]


def test_a_binary_keyed_vector_is_the_text_keyed_one(pg15_dsn: str) -> None:
    """A sealed batch keys its vectors in their binary form and sends them by binary COPY
    (issue 27, ADR 0065): the same tokens and positions as the text form, cast back, for
    quoted and escaped lexemes, weights, a lexeme past the fast split's 32 positions and
    positions whose low byte is 0 (256: the NUL a lexeme ends with is not the only one)."""
    from attested_cortex.attest.blinding import Blinder
    from attested_cortex.store import binary_copy as bc

    many = " ".join(["lighthouse"] * 40 + ["keeper"])
    at_256 = " ".join([f"w{i}" for i in range(1, 256)] + ["keeper"])
    texts = [("It's O'Brien's \\ café", many), ("", ""), ("a", "the harbour's lamps"),
             ("", at_256)]
    blinder = Blinder(KEY)
    with psycopg.connect(pg15_dsn, autocommit=True) as conn:
        vector = ("(setweight(to_tsvector('english', t), 'A') "
                  "|| setweight(to_tsvector('english', c), 'B'))")
        rows = conn.execute(f"SELECT {vector}::text, {vector} FROM unnest(%s::text[], "
                            "%s::text[]) WITH ORDINALITY AS u(t, c, n) ORDER BY n",
                            ([t for t, _ in texts], [c for _, c in texts]),
                            binary=True).fetchall()
        assert b"keeper\x00\x00\x01\x81\x00" in rows[3][1]  # at 256, weight B: 0x8100
        conn.execute("CREATE TABLE keyed (n int, v tsvector)")
        with conn.cursor().copy("COPY keyed FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"".join([bc.HEADER, *(
                bc.row(2, (bc.int4(n), bc.field(blinder.key_binary(bytes(v)))))
                for n, (_, v) in enumerate(rows)), bc.TRAILER]))
        same = conn.execute(
            "SELECT array_agg(k.v = u.x::tsvector ORDER BY k.n) FROM keyed k "
            "JOIN unnest(%s::text[]) WITH ORDINALITY AS u(x, n) ON u.n = k.n + 1",
            ([blinder.key_text(t.decode() if isinstance(t, bytes) else t)
              for t, _ in rows],)).fetchone()
    assert same == ([True] * len(texts),)
