"""Recall: full-text and (where configured) vector candidates, fused and ranked. Called by
the service layer's recall pipeline in three or four statements (docs/adr/0080, 0093):
:func:`fulltext_candidates` (the ranked full-text candidates, one statement or two: no
vector needed, so it runs while the query is embedded) and :func:`vector_candidates` (the
nearest vectors, on a second connection at the same time), then :func:`fuse` (the fusion
and the scores, reading the memories of the best ``limit`` only). The lists go from one
statement to the next as the JSON the database wrote (:class:`Candidates`). :func:`recall`
runs them in turn on one connection.

Ranking every match does not scale (a 3-term OR over common words at 100k memories matches
tens of thousands of rows), and ranking the newest matches only lost the best ones (ADR
0093: LongMemEval's answer sessions, older than the newest 200 of 850 matches), so recall
works on candidate lists chosen by relevance:

1. full-text candidates (ADR 0093, MaxScore's idea): the query's lexemes, rarest first,
   while their estimated matches (frequency from ANALYZE times the table's rows) add up to
   at most ``pool``, are each read from the GIN index, and every memory in scope holding
   one is scored (:data:`_FTS_RARE`, prepared). Memories holding only the commoner lexemes
   are read (:data:`_FTS_COMMON`, a second statement: the ``pool`` newest matching the AND
   form, relaxed to OR when fewer than ``limit``) only when those lexemes
   together could still outscore the ``limit``-th candidate (each lexeme's BM25 term is
   below ``idf * (K1 + 1)``); otherwise the full-text top ``limit`` is exact over the scope;
2. vector candidates (hybrid mode): the ``vector_pool`` nearest current vectors of the
   query's model (cosine distance, HNSW index), at least ``min_similarity`` alike;
3. each list is ranked (ties share a rank) and fused (docs/adr/0094): each list's scores
   scaled to 0..1 between its worst and best candidate, ``relevance = FULLTEXT_WEIGHT * f
   + (1 - FULLTEXT_WEIGHT) * v`` (1 means first in both lists); in full-text mode
   relevance is the full-text score. In hybrid mode a memory holding less than
   :data:`MATCH_FLOOR` of the query's rarity weight counts as no full-text evidence: its
   term is 0 and the vector half decides (docs/adr/0074: such partial matches, one word of
   a paraphrase's several, were lifted over the paraphrase's target);
4. ``score = relevance``; equal scores order by full-text score (a weak match left to the
   vector half still ranks above no match), then proximity (``1 / (1 + levels between the
   query namespace and the memory's)``), then ``updated_at`` (newest first), then ``id``:
   the order is total, so the same data always answers the same way, and recency or
   proximity never bury a better match (``recency``, ``1 / (1 + age / 30 days)``, is still
   reported by ``explain``).

The full-text score is BM25F (docs/adr/0093): per query lexeme its rarity (``ln((1 - f) /
f)``, ``f`` the share of memories holding it, docs/adr/0137; frequencies from the planner's
statistics of the search column, the words it does not list counted exactly from the index:
docs/adr/0114), times its saturated occurrences
``tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))``, an occurrence in the title
counting ``TITLE_WEIGHT`` times; divided by the query's total rarity weight (1: every query
word once at the average length).

With memories sealed (a sealing cipher on the connection, ADR 0056 item 5) the search column
holds keyed blind tokens: PostgreSQL still parses the query (its AND and OR forms and its
lexemes, in a statement that writes nothing), the lexemes are keyed here under every key
version the ring holds and kept plain for rows not sealed yet, and each row is tested
against the forms of its own token space (its ``key_version``, and its token form while
legacy tokens remain: ADR 0078), and weighed against them only (BM25 over its space's
keyed lexemes; each keyed lexeme is also read from the index on its own, for the rows of
its space): a row holds tokens of one space only, with as many tokens as lexemes, their
positions and weights, so scores equal the plain ones once every row is in one space (the
rarity weights come from each token's own frequency). The keyed lexemes' rarity is looked
up by the candidate statement itself (:data:`_LEX_KEYED`), as a plain recall's are
(:data:`_LEX_PLAIN`); a sealed recall takes one statement more, the parse.

A query namespace ``a/b/c`` searches ``a/b/c``, ``a/b`` and ``a``; without one, every
namespace is searched with proximity 1.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from attested_cortex.namespaces import ancestors, depth
from attested_cortex.store.database import Conn
from attested_cortex.store.embeddings import vector_literal
from attested_cortex.store.memories import Memory, memory_from_row
from attested_cortex.store.memory_ciphers import (
    MemoryCipher,
    Space,
    cipher_of,
    legacy_tokens,
    spaces,
)

DEFAULT_POOL = 200
#: docs/adr/0014: 50 lost nothing against 100 on the quality set, at 1.6 ms less per recall.
DEFAULT_VECTOR_POOL = 50
#: Passages read per memory of the vector pool (docs/adr/0096).
PASSAGES_READ = 2
#: Hybrid fusion's weight of the full-text list (docs/adr/0094): each list scaled to 0..1
#: between its worst and best candidate, the full-text share this, the vector share the rest.
#: Hybrid R@5 was at least the better list's on every set (LongMemEval with wordllama,
#: bench/quality.py's four sets with wordllama and MiniLM) for weights 0.6-0.65 with the
#: floor at 0.3-0.4; 0.7 lost one MiniLM lexical query, 0.55 LongMemEval (docs/adr/0094).
FULLTEXT_WEIGHT = 0.65
#: How hybrid recall fuses, as capabilities state it (``recall.fusion``).
FUSION = ("scaled scores: 0.65 full text + 0.35 vector (ADR 0094), then proximity, "
          "recency, id")
#: How a score is made, as ``explain`` states it.
FORMULA = ("hybrid: 0.65 * full-text score + 0.35 * similarity, each scaled 0..1 between its "
           "list's worst and best; full text: its score; equal ones by full-text score, "
           "proximity, recency, id")
#: Namespaces the planner expects at most this many memories in are searched exactly
#: (``_VEC_EXACT``): about 8 us a memory at 100k, so 7000 took 58 ms where the planner's
#: choice took 22 ms; at 10k the bench's 500-700 took 4.4 ms against 6.1 (docs/adr/0014).
EXACT_MAX = 1500
#: Hybrid fusion counts a full-text match only from this share of the query's rarity weight
#: on (``cov``: the rarity weights of the query words a memory holds, over all of them).
#: Below it a match is partial (one word of a paraphrase's several), and fused with a
#: middling vector it pushed the targets the vector half ranked in its top 5 out of the
#: answer (docs/adr/0074, where the floor was the full-text score of half the rarity
#: weight). 0.3 since docs/adr/0094: long questions (LongMemEval) hold their answer's words
#: for less than half their weight, and the paraphrase sets lost nothing at 0.3.
MATCH_FLOOR = 0.3

#: What the candidate lists carry of each memory: what scoring it needs (its search vector,
#: the columns of its token space's guard), so that no candidate is read a second time.
_CANDIDATE = "m.id, m.search, m.updated_at, m.ns_depth, m.key_version, m.token_format"

#: BM25 (docs/adr/0093): term saturation ``K1``, length normalisation ``B`` (a memory's
#: length is its number of lexemes against the average ANALYZE estimates, migration 0033: a
#: keyed vector has as many), and an occurrence in the title counted ``TITLE_WEIGHT`` times
#: (BM25F).
K1 = 1.2
B = 0.75
TITLE_WEIGHT = 2.5

#: A lexeme's occurrences in a row (``m.search``) against the query of it alone
#: (``lex.tq``): ``ts_rank`` with every weight 1 is ``H2(tf) / H2(inf)`` (the sum of
#: ``1/j^2`` over its ``tf`` positions, over pi^2/6), inverted here (exact to ``tf`` 256,
#: the positions a tsvector keeps); plus ``TITLE_WEIGHT - 1`` when it is in the title
#: (``lex.ta``: the lexeme restricted to weight A).
_TF = """(round(1 / greatest(1.6449340668 * (1 - ts_rank('{{1,1,1,1}}', d.sv, lex.tq)),
                            1 / 300.0) - 0.5)
            + {title_extra} * (d.sv @@ lex.ta)::int)"""
#: One candidate's BM25 (``bm25``), the share of the query's rarity weights its words cover
#: (``cov``, the fusion's floor) and the query's rarity weight (``total``: ``bm25 / total``
#: is 1 for a memory holding each query word once at the average length), all over the
#: lexemes of its own token space (``{row_space}``).
_SCORE = """CROSS JOIN LATERAL (SELECT m.search || ''::tsvector AS sv OFFSET 0) d
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(lex.idf * f.tf * {k1p1} / (f.tf + {k1} * (1 - {b} + {b} * (
                   CASE WHEN %(avgdl)s::float8 > 0 THEN length(d.sv) / %(avgdl)s::float8
                        ELSE 1 END
                   )))), 0)::float8 AS bm25,
               coalesce(sum(lex.idf) FILTER (WHERE f.tf > 0), 0)::float8 AS got,
               nullif((SELECT sum(l2.idf) FROM lex l2 WHERE l2.space = {row_space}), 0)
                   ::float8 AS total
        FROM lex CROSS JOIN LATERAL (SELECT CASE WHEN d.sv @@ lex.tq THEN """ + _TF + """
                                                ELSE 0 END AS tf) f
        WHERE lex.space = {row_space}) sc"""

#: The scored candidates ``fts`` ranked (ties share a rank), as the fusion reads them.
_RANK = """SELECT id, fts, cov, bm25, updated_at, ns_depth, rank() OVER (ORDER BY fts DESC) AS r
    FROM fts WHERE bm25 > 0"""

#: The query's lexemes, each with its rarity and estimated matches, and whether it is read
#: from the index on its own (``rare``: rarest first by groups of equal estimate, while the
#: rarer ones add up to less than the pool and each is estimated within it).
_LEX = """
{st}lex AS MATERIALIZED ({lex}),
lexw AS MATERIALIZED (
    SELECT x.*, (x.df <= %(pool)s AND x.prior < %(pool)s) IS TRUE AS rare FROM (
        SELECT lex.*, coalesce(sum(lex.df) OVER (
                   PARTITION BY lex.space ORDER BY lex.df RANGE BETWEEN UNBOUNDED PRECEDING
                   AND CURRENT ROW EXCLUDE GROUP), 0) AS prior
        FROM lex) x
)"""

#: Step 1a: every memory in scope holding a rare lexeme, scored; ``more`` says whether the
#: other lexemes together could still outscore the ``limit``-th of them (their BM25 terms
#: are each below ``idf * (K1 + 1)``), so that their own matches must be read (step 1b).
_FTS_RARE = _LEX + """,
rare_c AS MATERIALIZED (
    SELECT DISTINCT ON (m.id) m.* FROM lexw e CROSS JOIN LATERAL (
        SELECT """ + _CANDIDATE + """ FROM memories m
        WHERE m.search @@ e.tq AND m.deleted_at IS NULL {ns_filter}) m
    WHERE e.rare AND e.space = {row_space}
    ORDER BY m.id
),
fts AS MATERIALIZED (
    SELECT m.id, m.updated_at, m.ns_depth, sc.bm25, sc.got / sc.total AS cov,
           sc.bm25 / sc.total AS fts
    FROM rare_c m """ + _SCORE + """
)
SELECT (SELECT json_agg(x)::text FROM (""" + _RANK + """) x) AS rows,
       coalesce((SELECT bm25 FROM fts ORDER BY bm25 DESC OFFSET %(limit)s - 1 LIMIT 1), 0)
       < (SELECT coalesce(max(u.ub), 0) FROM (
              SELECT sum(idf) * {k1p1} AS ub FROM lexw WHERE NOT rare GROUP BY space) u)
           AS more
"""

#: Step 1b (only when step 1a says so): the ``pool`` newest memories matching the query's
#: AND form, relaxed to OR when fewer than ``limit``, scored, beside step 1a's (``rare``).
_FTS_COMMON = _LEX + """,
given AS (
    SELECT * FROM json_to_recordset(%(rare)s::json) AS g(
        id uuid, updated_at timestamptz, ns_depth int, bm25 float8, cov float8, fts float8)
),
and_c AS (
    SELECT """ + _CANDIDATE + """ FROM memories m
    WHERE m.deleted_at IS NULL AND {and_match} {ns_filter}
    ORDER BY m.updated_at DESC LIMIT %(pool)s
),
or_c AS (
    SELECT """ + _CANDIDATE + """ FROM memories m
    WHERE (SELECT count(*) FROM and_c) < %(limit)s
      AND m.deleted_at IS NULL AND {or_match} {ns_filter}
    ORDER BY m.updated_at DESC LIMIT %(pool)s
),
fts AS (
    SELECT * FROM given
    UNION ALL
    SELECT m.id, m.updated_at, m.ns_depth, sc.bm25, sc.got / sc.total AS cov,
           sc.bm25 / sc.total AS fts
    FROM (SELECT DISTINCT ON (u.id) u.* FROM (
              SELECT * FROM and_c UNION ALL SELECT * FROM or_c) u
          WHERE NOT EXISTS (SELECT 1 FROM given g WHERE g.id = u.id)
          ORDER BY u.id) m
    """ + _SCORE + """
)
SELECT json_agg(x)::text AS rows FROM (""" + _RANK + """) x
"""

#: The vector candidates: the nearest passages (docs/adr/0096: a long memory has several),
#: each memory once, scored by its best passage. Passages are read :data:`PASSAGES_READ`
#: times the pool so that one long memory's passages do not crowd the others out.
_VEC = """
near AS (
    SELECT e.memory_id AS id, m.updated_at, m.ns_depth,
           (e.embedding::vector({dim}) <=> %(qvec)s::vector({dim}))::float8 AS dist
    FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id
    WHERE e.dim = {dim} AND e.model = %(model)s AND e.revision = m.revision
      AND m.deleted_at IS NULL {ns_filter}
    ORDER BY e.embedding::vector({dim}) <=> %(qvec)s::vector({dim})
    LIMIT %(vector_pool)s * %(passages_read)s
),
vec AS (
    SELECT * FROM (SELECT DISTINCT ON (id) * FROM near ORDER BY id, dist) best
    ORDER BY dist, id LIMIT %(vector_pool)s
),
vec_r AS (
    SELECT id, dist, updated_at, ns_depth, rank() OVER (ORDER BY dist) AS r FROM vec
    WHERE dist <= 1 - %(min_similarity)s
)
"""

#: The vector candidates of a recall in a small namespace (the planner expects at most
#: :data:`EXACT_MAX` memories there): exact, each of its memories' vectors read by primary key,
#: its best passage kept. For such a filter the planner otherwise hash-joins the namespace with
#: a scan of every vector, or walks the HNSW index with the filter (approximate, and no faster
#: at 10k: docs/adr/0014). A larger namespace keeps ``_VEC``, the planner's choice.
_VEC_EXACT = """
vec AS (
    SELECT m.id, m.updated_at, m.ns_depth, e.dist FROM memories m CROSS JOIN LATERAL (
        SELECT (e.embedding::vector({dim}) <=> %(qvec)s::vector({dim}))::float8 AS dist
        FROM memory_embeddings e
        WHERE e.memory_id = m.id AND e.dim = {dim} AND e.model = %(model)s
          AND e.revision = m.revision
        ORDER BY 1 LIMIT 1) e
    WHERE m.deleted_at IS NULL AND m.namespace = ANY(%(namespaces)s) {restrict}
    ORDER BY e.dist LIMIT %(vector_pool)s
),
vec_r AS (
    SELECT id, dist, updated_at, ns_depth, rank() OVER (ORDER BY dist) AS r FROM vec
    WHERE dist <= 1 - %(min_similarity)s
)
"""

#: The planner's estimate of the memories in the query's namespaces (no rows are read).
_NS_ROWS = "EXPLAIN (FORMAT JSON) SELECT 1 FROM memories m WHERE m.namespace = ANY(%s)"

#: Hybrid fusion (docs/adr/0094): each list's scores scaled to 0..1 between its worst and best
#: candidate, then ``FULLTEXT_WEIGHT`` of the full-text one plus the rest of the vector one.
_HYBRID_SELECT = """
, bounds AS (
    SELECT (SELECT min(fts) FROM fts_r WHERE cov >= {floor}) AS f_lo,
           (SELECT max(fts) FROM fts_r WHERE cov >= {floor}) AS f_hi,
           (SELECT min(1 - dist) FROM vec_r) AS v_lo, (SELECT max(1 - dist) FROM vec_r) AS v_hi
),
ranked AS (
    SELECT c.id, coalesce(f.updated_at, v.updated_at) AS updated_at,
           coalesce(f.ns_depth, v.ns_depth) AS ns_depth,
           f.fts, f.r AS fts_rank, v.dist, v.r AS vec_rank,
           ({wf} * coalesce(CASE WHEN f.cov >= {floor} THEN CASE WHEN b.f_hi > b.f_lo
                    THEN (f.fts - b.f_lo) / (b.f_hi - b.f_lo) ELSE 1 END END, 0)
            + {wv} * CASE WHEN v.dist IS NULL THEN 0 WHEN b.v_hi > b.v_lo
                    THEN (1 - v.dist - b.v_lo) / (b.v_hi - b.v_lo) ELSE 1 END)::float8
               AS relevance
    FROM (SELECT id FROM fts_r UNION SELECT id FROM vec_r) c
    LEFT JOIN fts_r f USING (id) LEFT JOIN vec_r v USING (id) CROSS JOIN bounds b
)
"""

_FTS_SELECT = """
, ranked AS (
    SELECT id, updated_at, ns_depth, fts, r AS fts_rank, NULL::float8 AS dist,
           NULL::bigint AS vec_rank, fts AS relevance
    FROM fts_r
)
"""

#: Scores from the candidates' own columns (both lists carry ``updated_at`` and
#: ``ns_depth``), then the memories read for the ``limit`` best only: reading every
#: candidate's row to score it (240 of them for a rare-word recall at 100k) cost 1.7 of the
#: final statement's 5 ms. A memory deleted since its list was made is left out.
_FINAL = """
, scored AS (
    SELECT x.*,
           (1 / (1 + extract(epoch FROM (now() - x.updated_at)) / 2592000.0))::float8
               AS recency,
           (1.0 / (1 + greatest(%(qdepth)s - x.ns_depth, 0)))::float8 AS proximity
    FROM ranked x
),
top AS (
    SELECT *, relevance AS score FROM scored
    ORDER BY score DESC, fts DESC NULLS LAST, proximity DESC, updated_at DESC, id
    LIMIT %(limit)s
)
SELECT m.id, m.namespace, m.title, m.content, m.tags, m.metadata, m.author, m.revision,
       m.created_at, m.updated_at, m.deleted_at, m.key_version, m.sealed,
       t.fts, t.fts_rank, t.dist, t.vec_rank, t.relevance, t.recency, t.proximity, t.score,
       {embedded} AS embedded
FROM top t JOIN memories m USING (id)
WHERE m.deleted_at IS NULL
ORDER BY t.score DESC, t.fts DESC NULLS LAST, t.proximity DESC, t.updated_at DESC, t.id
"""

_EMBEDDED = (
    "EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id "
    "AND e.model = %(model)s AND e.dim = {dim} AND e.revision = m.revision)"
)


#: The least rarity weight: a word every memory holds (ln 1 = 0) still counts, so that its
#: matches score above nothing and are ranked (a space of thousands of memories all holding
#: "tea": tests/spoke/test_reading.py).
MIN_IDF = 0.01
#: A query lexeme's rarity weight, ln(1 / its frequency among the rows' search vectors), from
#: the planner's statistics ``st`` (elements and their frequencies; a lexeme not among them
#: counts half the least frequent one's), as the probe of :data:`_LEXEMES` reads it; the
#: candidate statements count unlisted lexemes instead (:data:`_IDF_COUNTED`, ADR 0114).
_IDF = """greatest(ln(1.0 / greatest(coalesce(
               st.freqs[array_position(st.elems, q.lexeme)],
               st.freqs[cardinality(st.elems) + 1] / 2,
               0.01), 1e-9)), """ + str(MIN_IDF) + """)::float8 AS idf"""
#: The query's lexemes and their rarity weights, from the planner's statistics of the search
#: column: a statement of its own, prepared once per connection (inside the recall statement
#: the ``pg_stats`` view was planned anew with every recall, docs/adr/0014; the candidate
#: statements now read ``cortex_search_stats()`` instead). Asked only through
#: :data:`_LEXEMES_PROBED`, by a server whose key no longer seals.
_LEXEMES = """
WITH st AS (
    SELECT s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs
    FROM pg_stats s
    WHERE s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'search'
    LIMIT 1
)
SELECT q.lexeme,
       """ + _IDF + """
FROM unnest(to_tsvector('english', %(query)s)) q LEFT JOIN st ON true
"""


#: :data:`_LEXEMES`, each row also saying whether any memory is sealed (the partial index
#: of sealed rows answers, once per statement): a query without lexemes matches nothing in
#: any token space, so it needs no answer.
_LEXEMES_PROBED = _LEXEMES.replace(
    "AS idf\n", "AS idf,\n       EXISTS (SELECT 1 FROM memories WHERE key_version IS NOT NULL)"
    " AS sealed_rows\n", 1)


#: A lexeme ``q.lexeme`` as a query of that lexeme alone, exactly: quoted in the tsquery
#: syntax (a quote doubled, a backslash escaped), never parsed or normalised again.
_LEXEME_QUERY = (r"""('''' || replace(replace(q.lexeme, '\', '\\'), '''', '''''')"""
                 r""" || '''')::tsquery""")
#: The same lexeme in the title only (weight A), for BM25F's title weight.
_TITLE_QUERY = _LEXEME_QUERY.replace("'''')::tsquery", "''':A')::tsquery")
_AND_QUERY = "websearch_to_tsquery('english', %(query)s)"

#: A lexeme the statistics do not list (rarer than the least common one they do: the
#: statistics list about 1,000 lexemes, and every word of a LongMemEval question rarer than
#: 1 session in 10 weighed the same) is counted exactly, from the GIN index (``x.n``): it
#: matches few rows by definition, and the rare step reads those same rows next. The count
#: stops at the least listed lexeme's estimated rows (or the pool): statistics older than a
#: burst of writes cannot make it read more. docs/adr/0114.
_COUNTED = """CROSS JOIN LATERAL (SELECT """ + _LEXEME_QUERY + """ AS tq) t
    CROSS JOIN LATERAL (SELECT CASE WHEN st.nrows > 0
            AND array_position(st.elems, q.lexeme) IS NULL THEN (
        SELECT count(*) FROM (
            SELECT 1 FROM memories m WHERE m.search @@ t.tq AND m.deleted_at IS NULL
            LIMIT greatest(ceil(st.nrows * coalesce(st.freqs[cardinality(st.elems) + 1], 0)),
                           %(pool)s)::bigint) c) END::float8 AS n) x"""
#: The lexeme's frequency: listed, as ANALYZE estimated it; unlisted, counted (``x.n``); a
#: lexeme no row holds (or any before the first ANALYZE), half the least listed one's.
_FREQ_COUNTED = """coalesce(st.freqs[array_position(st.elems, q.lexeme)],
               nullif(x.n, 0) / st.nrows, st.freqs[cardinality(st.elems) + 1] / 2, 0.01)"""
#: The rarity weight (docs/adr/0137): the odds against a memory holding the lexeme,
#: ``ln((1 - f) / f)`` (Robertson and Sparck Jones' weight without its small-sample 0.5),
#: ``f`` its frequency: for a rare word what ``ln(1 / f)`` was, while a word in half the
#: memories or more tells them apart by nothing and weighs :data:`MIN_IDF`.
_IDF_COUNTED = ("greatest(ln(greatest(1 - " + _FREQ_COUNTED + ", 1e-9) / greatest("
                + _FREQ_COUNTED + ", 1e-9)), " + str(MIN_IDF) + ")::float8 AS idf")
_DF_COUNTED = ("(CASE WHEN st.nrows > 0 THEN st.nrows * " + _FREQ_COUNTED
               + " END)::float8 AS df")

#: The query's forms as text (keyed recall keys them): AND, the OR relaxation, lexemes.
_FORMS = """
SELECT websearch_to_tsquery('english', %(query)s)::text AS and_q,
       coalesce(nullif(replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | '), ''),
                websearch_to_tsquery('english', %(query)s)::text) AS or_q,
       array(SELECT l.lexeme FROM unnest(to_tsvector('english', %(query)s)) AS l) AS lexemes
"""

#: Plain recall: the query's lexemes and their rarity weights, looked up inside the
#: candidate statement as keyed recall's are (:data:`_LEX_KEYED`): the round trip of
#: :data:`_LEXEMES` before it cost 1.0 / 1.4 ms p50 / p95 of a rare-word recall at 100k.
_LEX_PLAIN = """
    SELECT q.lexeme, """ + _IDF_COUNTED + """, """ + _DF_COUNTED + """,
           0 AS space, t.tq, """ + _TITLE_QUERY + """ AS ta
    FROM unnest(to_tsvector('english', %(query)s)) q LEFT JOIN st ON true
    """ + _COUNTED + """
"""

#: Keyed recall: the keyed lexemes (each with its token space) and their rarity weights,
#: looked up inside the candidate statement: the expression of :data:`_LEXEMES` over the
#: statistics ``cortex_search_stats()`` reads (migration 0026: PL/pgSQL keeps its plan; in
#: FROM it runs once). A round trip of its own (the first design, ADR 0065) was the whole of
#: sealed recall's extra cost at 10k; the candidate statement takes about the same time over
#: tokens as over lexemes.
_LEX_KEYED = """
    SELECT q.lexeme, """ + _IDF_COUNTED + """, """ + _DF_COUNTED + """,
           q.space, t.tq, """ + _TITLE_QUERY + """ AS ta
    FROM unnest(%(lexemes)s::text[], %(spaces)s::int[]) AS q(lexeme, space)
    LEFT JOIN st ON true
    """ + _COUNTED + """
"""
#: The statistics, read once (a function scan joined directly ran again for every lexeme).
_ST = "st AS MATERIALIZED (SELECT * FROM cortex_search_stats()),"

#: The AND query's lexemes joined by OR (the relaxed form). Written inline, not in a CTE,
#: so the planner sees the query's lexemes and estimates how many rows match: with that
#: estimate it scans the recency index for very common words and the GIN index for rare
#: ones (a CTE hides the lexemes and the plan ranks every match: 430 ms at 100k).
_OR_QUERY = (
    "coalesce(nullif(replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | '), '')"
    "::tsquery, websearch_to_tsquery('english', %(query)s))"
)


#: How often a connection asks for the search vectors' average length (ANALYZE changes it).
AVGDL_RECHECK_S = 60.0
_AVGDL: WeakKeyDictionary[Conn, tuple[float, float | None]] = WeakKeyDictionary()


async def search_length(conn: Conn) -> float | None:
    """The average number of lexemes of a search vector (BM25's ``avgdl``; None before
    ANALYZE saw the table), asked at most every :data:`AVGDL_RECHECK_S` seconds per
    connection: reading the expression statistics costs milliseconds (migration 0033)."""
    now = time.monotonic()
    known = _AVGDL.get(conn)
    if known is not None and now < known[0]:
        return known[1]
    cur = await conn.execute("SELECT cortex_search_avgdl() AS avgdl", prepare=True)
    row = await cur.fetchone()
    value = None if row is None else (row["avgdl"] if isinstance(row, dict) else row[0])
    avgdl = None if value is None else float(value)
    _AVGDL[conn] = (now + AVGDL_RECHECK_S, avgdl)
    return avgdl


@dataclass(frozen=True)
class QueryVector:
    """The query's embedding and the model whose vectors it is compared with."""

    model: str
    vector: tuple[float, ...]
    min_similarity: float = 0.0
    vector_pool: int = DEFAULT_VECTOR_POOL
    #: Whether to compare at all; False still reports which results have a current vector
    #: (the query could not be embedded in time).
    search: bool = True


@dataclass(frozen=True)
class ScoreParts:
    """How a result's score was made (``explain: true``)."""

    fulltext_score: float | None
    fulltext_rank: int | None
    vector_similarity: float | None
    vector_rank: int | None
    relevance: float
    recency: float
    proximity: float

    def as_dict(self) -> dict[str, Any]:
        """JSON form, rounded for reading."""
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {
            "fulltext": None if self.fulltext_rank is None else {
                "score": r(self.fulltext_score), "rank": self.fulltext_rank},
            "vector": None if self.vector_rank is None else {
                "similarity": r(self.vector_similarity), "rank": self.vector_rank},
            "relevance": r(self.relevance), "recency": r(self.recency),
            "proximity": r(self.proximity),
            "formula": FORMULA,
        }


@dataclass(frozen=True)
class Hit:
    """A recalled memory, its score, how the score was made, and (hybrid mode) whether the
    memory has a current vector."""

    memory: Memory
    score: float
    parts: ScoreParts | None = None
    embedded: bool | None = None


@dataclass(frozen=True)
class Scope:
    """Where a recall looks: the query's namespaces (none: everywhere) and the caller's
    further condition on the memory ``m``; the same for both candidate lists."""

    #: ``namespaces`` (the query namespace and its ancestors), ``qdepth`` and the
    #: condition's own parameters.
    params: dict[str, Any]
    #: ``AND ...`` conditions on ``m``: the namespaces, then ``restrict``.
    ns_filter: str
    #: The caller's condition alone (the exact vector read has its own namespace test).
    restrict: str = ""


def scope_of(namespace: str | None,
             restrict: tuple[str, dict[str, Any]] | None = None) -> Scope:
    """A recall's :class:`Scope`. ``restrict``: a further ``AND ...`` condition on the memory
    ``m`` and its parameters, applied to every candidate list before it is cut to its pool
    (the spoke-memory recall: the records a caller's grants reach, :mod:`.spoke.reading`)."""
    params: dict[str, Any] = {"qdepth": 0}
    ns_filter = ""
    if namespace is not None:
        ns_filter = "AND m.namespace = ANY(%(namespaces)s)"
        params.update(namespaces=ancestors(namespace), qdepth=depth(namespace))
    extra = ""
    if restrict is not None:
        extra, more = restrict
        params.update(more)
    return Scope(params, ns_filter + extra, extra)


@dataclass(frozen=True)
class Candidates:
    """One candidate list, ranked, as the database wrote it: a JSON array of its rows (``id``,
    the full-text score ``fts`` or the vector's cosine distance ``dist``, rank ``r``,
    ``updated_at``, ``ns_depth``: what the final score needs besides, so that only the best
    memories are read). Text both ways: the list goes back to the database as it came, and
    adapting its 200 rows to Python values and back (uuids, timestamps, floats as arrays) cost
    4 ms of a 13 ms recall, their JSON 1 ms. PostgreSQL writes float8 and timestamptz in
    JSON exactly (shortest round-trip digits, microseconds), so the scores fused are the ones
    computed."""

    rows: str

    def entries(self) -> list[dict[str, Any]]:
        """The rows as Python values (diagnostics and tests; recall never decodes them)."""
        decoded: list[dict[str, Any]] = json.loads(self.rows)
        return sorted(decoded, key=lambda row: (row["r"], str(row["id"])))


def _candidates(row: dict[str, Any] | None) -> Candidates:
    return Candidates(row["rows"] if row is not None and row["rows"] is not None else "[]")


@dataclass(frozen=True)
class FulltextCandidates:
    """The first step of a recall: the full-text candidate list, ranked (``fts_r``), and the
    parameters the last step (:func:`fuse`) reuses."""

    found: Candidates
    params: dict[str, Any]
    scope: Scope


async def fulltext_candidates(
    conn: Conn, *, query: str, scope: Scope, limit: int, pool: int = DEFAULT_POOL,
) -> FulltextCandidates:
    """Step 1 of a recall: the query's full-text candidates, ranked, in one statement (with
    memories sealed, after the round trip that parses the query for keying).

    It needs no query vector, so the service runs it while the query is being embedded and
    its vector candidates are read (:func:`vector_candidates`, on a second connection).
    """
    params: dict[str, Any] = {**scope.params, "query": query, "limit": limit,
                              "pool": max(pool, limit), "avgdl": await search_length(conn)}
    cipher: MemoryCipher | None = cipher_of(conn)
    keyed = cipher is not None and cipher.seals
    forms: dict[str, Any] | None = None
    if keyed:
        cur = await conn.execute(_FORMS, {"query": query}, prepare=True)
        forms = await cur.fetchone()
        assert forms is not None
    elif cipher is not None:
        # A cipher that no longer seals (encryption.at_rest turned off) still keys the
        # query while sealed rows remain (their tokens are keyed): each lexeme row says so.
        cur = await conn.execute(_LEXEMES_PROBED, {"query": query}, prepare=True)
        lex = list(await cur.fetchall())
        if lex and lex[0]["sealed_rows"]:
            # rare: switched off over sealed rows (one more round trip, for the forms)
            cur = await conn.execute(_FORMS, {"query": query}, prepare=True)
            forms = await cur.fetchone()
    if forms is None or cipher is None:
        and_match, or_match = f"m.search @@ {_AND_QUERY}", f"m.search @@ {_OR_QUERY}"
        row_space, lex_cte = "0", _LEX_PLAIN
    else:
        and_match, or_match, row_space = _keyed_forms(
            cipher, forms, params, legacy=await legacy_tokens(conn))
        lex_cte = _LEX_KEYED
    shape = {"ns_filter": scope.ns_filter, "st": _ST, "lex": lex_cte, "row_space": row_space,
             "k1": K1, "k1p1": K1 + 1, "b": B, "title_extra": TITLE_WEIGHT - 1}
    # Step 1a is prepared: its plan never sees the lexemes (each is read by a scan of its
    # own), and planning it took as long as running it. Step 1b never is: a cached generic
    # plan cannot see the query's lexemes and falls back to ranking every match (the plan
    # choice depends on how common they are).
    cur = await conn.execute(("WITH" + _FTS_RARE.format(**shape)).encode(), params,
                             prepare=True)
    first = await cur.fetchone()
    rows = first["rows"] if first is not None and first["rows"] is not None else "[]"
    if first is not None and first["more"]:
        cur = await conn.execute(
            ("WITH" + _FTS_COMMON.format(**shape, and_match=and_match, or_match=or_match))
            .encode(), {**params, "rare": rows}, prepare=False)
        common = await cur.fetchone()
        rows = common["rows"] if common is not None and common["rows"] is not None else "[]"
    return FulltextCandidates(Candidates(rows), params, scope)


async def vector_candidates(conn: Conn, scope: Scope, vector: QueryVector) -> Candidates:
    """The query vector's candidates, ranked: the ``vector_pool`` nearest current vectors
    of its model within ``scope``. A namespace the planner expects few memories in is read
    exactly (:data:`_VEC_EXACT`: one more round trip asks the planner first)."""
    exact = False
    if "namespaces" in scope.params:
        plan_cur = await conn.execute(_NS_ROWS, (scope.params["namespaces"],), prepare=False)
        plan = await plan_cur.fetchone()
        exact = plan is not None and plan["QUERY PLAN"][0]["Plan"]["Plan Rows"] <= EXACT_MAX
    dim = len(vector.vector)
    params = {**scope.params, "model": vector.model, "qvec": vector_literal(vector.vector),
              "vector_pool": vector.vector_pool, "min_similarity": vector.min_similarity,
              "passages_read": PASSAGES_READ}
    text = (_VEC_EXACT.format(dim=dim, restrict=scope.restrict) if exact
            else _VEC.format(dim=dim, ns_filter=scope.ns_filter))
    # Not prepared: the plan depends on the namespace's size.
    cur = await conn.execute(f"WITH{text}SELECT json_agg(vec_r)::text AS rows "
                             "FROM vec_r".encode(), params, prepare=False)
    return _candidates(await cur.fetchone())


def _keyed_forms(cipher: MemoryCipher, forms: dict[str, Any], params: dict[str, Any], *,
                 legacy: bool) -> tuple[str, str, str]:
    """The conditions matching the query's AND and OR forms, each row in its own token space,
    and the number of a row's space: keyed under every version of the ring (``legacy``: in
    both token forms, ADR 0078), and plain (rows not sealed yet), each form behind its
    space's guard. A row is tested and weighed against its own space's lexemes only, as
    plain recall against the plain ones: a form OR'd across spaces doubled the work of a
    recency scan filtering on it (p95 +16 % at 100k). The lexemes are keyed alike, each
    with its space's number (their rarity weights and estimated matches are looked up by the
    candidate statement: :data:`_LEX_KEYED`)."""
    covered = spaces(cipher, legacy=legacy)
    params.update(lexemes=[s.token(cipher, lexeme)
                           for s in covered for lexeme in forms["lexemes"]],
                  spaces=[n for n, _ in enumerate(covered) for _ in forms["lexemes"]])
    # Tested in this order: the plain space first and the space new rows are keyed in (most
    # rows) last, its ``@@`` before its guard: a row of that space is rejected after one
    # check of its version and one ``@@`` (guard first, the recency scan of a common word
    # took 0.3-0.5 ms longer over 6,000 rows, about a tenth of it).
    current = Space(cipher.version)
    matches = []
    for form in ("and_q", "or_q"):
        each = []
        for s in sorted(covered, key=lambda s: (s == current, s.version != 0)):
            params[f"{form}_{s.name}"] = s.key(cipher, forms[form])
            match = f"m.search @@ %({form}_{s.name})s::tsquery"
            each.append(f"({match} AND {s.guard(legacy)})" if s == current
                        else f"({s.guard(legacy)} AND {match})")
        matches.append(f"({' OR '.join(each)})")
    numbered = " ".join(f"WHEN {s.guard(legacy)} THEN {n:d}" for n, s in enumerate(covered))
    return matches[0], matches[1], f"CASE {numbered} END"


#: A candidate list sent back as the database wrote it (:class:`Candidates`), read as the
#: rows of ``fts_r`` or ``vec_r`` (``{value}``: the score column, ``fts`` or ``dist``).
_GIVEN = """
{name} AS (
    SELECT * FROM json_to_recordset(%({param})s::json)
        AS g(id uuid, {value} float8, r bigint, updated_at timestamptz, ns_depth int)
)"""
#: The full-text list also carries each row's share of the query's rarity weight (``cov``).
_FTS_GIVEN = _GIVEN.format(name="fts_r", param="fts_rows", value="fts float8, cov")
_VEC_GIVEN = "," + _GIVEN.format(name="vec_r", param="vec_rows", value="dist")


async def fuse(conn: Conn, found: FulltextCandidates, vector: QueryVector | None = None,
               near: Candidates | None = None) -> list[Hit]:
    """The last step of a recall: the full-text candidates ``found`` fused with the vector
    candidates (hybrid mode) and scored, best first, in one statement (see the module
    docstring). ``near``: the vector candidates, read already beside step 1; without them
    (hybrid mode, no second connection was free) they are read here first."""
    params = {**found.params, "fts_rows": found.found.rows}
    parts = ["WITH", _FTS_GIVEN]
    embedded = "NULL::boolean"
    if vector is not None:
        params["model"] = vector.model
        embedded = _EMBEDDED.format(dim=len(vector.vector))
    if vector is not None and vector.search:
        if near is None:
            near = await vector_candidates(conn, found.scope, vector)
        params["vec_rows"] = near.rows
        parts += [_VEC_GIVEN, _HYBRID_SELECT.format(wf=FULLTEXT_WEIGHT, wv=1 - FULLTEXT_WEIGHT,
                                                    floor=MATCH_FLOOR)]
    else:
        parts.append(_FTS_SELECT)
    parts.append(_FINAL.format(embedded=embedded))
    cur = await conn.execute("".join(parts).encode(), params, prepare=True)
    cipher = cipher_of(conn)
    return [_hit(row, cipher) for row in await cur.fetchall()]


async def recall(
    conn: Conn, *, query: str, namespace: str | None, limit: int, pool: int = DEFAULT_POOL,
    vector: QueryVector | None = None,
) -> list[Hit]:
    """The best ``limit`` memories for ``query``, best first: every step on ``conn``, one
    after the other (the service overlaps them with the query's embedding and each other)."""
    found = await fulltext_candidates(conn, query=query, scope=scope_of(namespace),
                                      limit=limit, pool=pool)
    return await fuse(conn, found, vector)


def _hit(row: dict[str, Any], cipher: MemoryCipher | None) -> Hit:
    dist = row["dist"]
    parts = ScoreParts(
        fulltext_score=row["fts"], fulltext_rank=row["fts_rank"],
        vector_similarity=None if dist is None else 1 - float(dist),
        vector_rank=row["vec_rank"], relevance=float(row["relevance"]),
        recency=float(row["recency"]), proximity=float(row["proximity"]),
    )
    return Hit(memory_from_row(row, cipher), float(row["score"]), parts, row["embedded"])
