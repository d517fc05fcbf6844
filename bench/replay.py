"""Recall replayed offline over a prepared database's rows (docs/adr/0144): BM25 as
store/recall.py weighs it, the server's candidate rule, exact cosine over every passage and
ADR 0094's fusion, so that a scoring method can be tried on LongMemEval and on
bench/quality.py's sets in seconds, without a server, before it is built.

Not part of ``make bench``: a diagnosis, run by hand, as bench/fusion.py. It reproduces the
server within a question or two (LongMemEval static hybrid R@5 / R@10 0.811 / 0.877 against
the server's 0.809 / 0.879; bench/quality.py's four sets exactly, both models) and prints the
baseline beside RM3 pseudo-relevance feedback and the passage mixes ADR 0144 measured, the
lexical half's best window (passage-level BM25, ADR 0146) and how often an answer is in the
top k of either list at all (the ceiling of any fusion of them)::

    python -m bench.replay minilm postgresql://.../bench_longmemeval

The database is one bench/longmemeval.py prepared (sessions loaded, the model's backfill
done; the static side's is ``<name>_static`` when MiniLM's side was measured too).
bench/quality.py's memories are copied into a ``replay_quality`` database on the same server
(once) and embedded here.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import sys
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg

from attested_cortex.embedding.choosing import build_embedder
from attested_cortex.store import recall as store_recall
from attested_cortex.store.migrating import migrate
from bench import heldout
from bench.longmemeval import asked, opaque, oracle, with_dbname
from bench.qualityset import build

K1, B = store_recall.K1, store_recall.B
TITLE_EXTRA = store_recall.TITLE_WEIGHT - 1
MIN_IDF = store_recall.MIN_IDF
POOL, LIMIT = store_recall.DEFAULT_POOL, 10
MODELS = {"static": "wordllama/l2_supercat",
          "minilm": "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"}
Array = Any  # numpy arrays


class Corpus:
    """A database's live memories: each lexeme's occurrences (with the title's weight), the
    memories' lengths and exact document frequencies, and each model's passage vectors."""

    def __init__(self, dsn: str, models: list[str]) -> None:
        with psycopg.connect(dsn) as conn:
            self.ids = [str(r[0]) for r in conn.execute(
                "SELECT id FROM memories WHERE deleted_at IS NULL ORDER BY id")]
            self.titles = {str(i): t for i, t in conn.execute("SELECT id, title FROM memories")}
            updated = {str(i): float(t) for i, t in conn.execute(
                "SELECT id, extract(epoch FROM updated_at) FROM memories")}
            rows = conn.execute(
                "SELECT m.id::text, u.lexeme, coalesce(cardinality(u.positions), 1), "
                "'A' = ANY(u.weights::text[]) FROM memories m, unnest(m.search) u "
                "WHERE m.deleted_at IS NULL").fetchall()
            avgdl = conn.execute("SELECT cortex_search_avgdl()").fetchone()
            stats = conn.execute("SELECT elems, freqs FROM cortex_search_stats()").fetchone()
            at = {i: n for n, i in enumerate(self.ids)}
            self.vectors: dict[str, tuple[Array, Array, Array]] = {}
            for model in models:
                found = conn.execute(
                    "SELECT e.memory_id::text, e.passage, e.embedding::text FROM "
                    "memory_embeddings e JOIN memories m ON m.id = e.memory_id "
                    "WHERE e.model = %s AND e.revision = m.revision ORDER BY 1, 2",
                    (model,)).fetchall()
                matrix = np.vstack([np.array(json.loads(r[2]), dtype=np.float32)
                                    for r in found])
                matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
                self.vectors[model] = (np.array([at[r[0]] for r in found]),
                                       np.array([r[1] for r in found]), matrix)
        self.n = len(self.ids)
        self.means: dict[str, Array] = {}
        self.updated = np.array([updated[i] for i in self.ids])
        self.vocab: dict[str, int] = {}
        for _, lexeme, _, _ in rows:
            self.vocab.setdefault(lexeme, len(self.vocab))
        self.words = list(self.vocab)
        self.tf = np.zeros((self.n, len(self.vocab)), dtype=np.float32)
        weighted = np.zeros_like(self.tf)
        for mid, lexeme, count, in_title in rows:
            self.tf[at[mid], self.vocab[lexeme]] = count
            weighted[at[mid], self.vocab[lexeme]] = count + (TITLE_EXTRA if in_title else 0)
        self.dl = (self.tf > 0).sum(axis=1).astype(np.float32)
        self.df = (self.tf > 0).sum(axis=0).astype(np.float64)
        self.length = self.tf.sum(axis=1)
        average = float(avgdl[0]) if avgdl and avgdl[0] else float(self.dl.mean())
        norm = K1 * (1 - B + B * self.dl / average)
        self.sat = np.where(weighted > 0, weighted * (K1 + 1) / (weighted + norm[:, None]),
                            0).astype(np.float32)
        share = np.clip(self.df / self.n, 1e-9, None)
        self.idf = np.maximum(np.log(np.clip(1 - share, 1e-9, None) / share), MIN_IDF)
        # a lexeme no memory holds: half the least listed frequency, as the server has it
        elems, freqs = (stats or (None, None))
        self.f0 = float(freqs[len(elems)]) / 2 if elems and freqs else 0.05
        self.idf0 = max(math.log((1 - self.f0) / self.f0), MIN_IDF)


class Windows:
    """Each memory's windows of ``width`` positions, ``stride`` apart (the last one ending at
    its last position), as passages for BM25 (ADR 0146): a lexeme's occurrences per window,
    the windows' lengths (lexemes in them) and, per lexeme, the windows holding it.

    ``rows`` are ``(memory id, lexeme, positions)`` as ``unnest(search)`` gives them, ``ids``
    the memories in the corpus's order (:func:`windows_of` reads both from a database)."""

    def __init__(self, ids: list[str], rows: list[tuple[str, str, list[int]]],
                 width: int = 100, stride: int = 50) -> None:
        last: dict[str, int] = defaultdict(int)
        for mid, _, positions in rows:
            last[mid] = max(last[mid], max(positions))
        first: dict[str, tuple[int, int]] = {}
        count = 0
        for mid in ids:
            k = max(1, math.ceil(max(last[mid] - width, 0) / stride) + 1)
            first[mid] = (count, k)
            count += k
        self.owner = np.zeros(count, dtype=np.int64)
        for n, mid in enumerate(ids):
            base, k = first[mid]
            self.owner[base:base + k] = n
        postings: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.length = np.zeros(count)
        for mid, lexeme, positions in rows:
            base, k = first[mid]
            for p in positions:
                # window j holds positions j * stride + 1 .. j * stride + width
                for j in range(max(0, math.ceil((p - width) / stride)),
                               min(k - 1, (p - 1) // stride) + 1):
                    postings[lexeme][base + j] += 1
                    self.length[base + j] += 1
        self.postings = {lx: (np.fromiter(d.keys(), dtype=np.int64),
                              np.fromiter(d.values(), dtype=np.float64))
                         for lx, d in postings.items()}
        self.n, self.members = count, len(ids)
        self.average = float(self.length.mean()) if count else 1.0

    def best(self, words: list[str]) -> Array:
        """Each memory's best window's BM25 over ``words``, with the windows' own document
        frequencies and lengths."""
        score = np.zeros(self.n)
        for lexeme in set(words):
            if lexeme not in self.postings:
                continue
            idx, tf = self.postings[lexeme]
            share = len(idx) / self.n
            idf = max(math.log((1 - share) / share), MIN_IDF) if share < 1 else MIN_IDF
            norm = K1 * (1 - B + B * self.length[idx] / self.average)
            score[idx] += idf * tf * (K1 + 1) / (tf + norm)
        best = np.zeros(self.members)
        np.maximum.at(best, self.owner, score)
        return best


def windows_of(dsn: str, c: Corpus, width: int = 100, stride: int = 50) -> Windows:
    """:class:`Windows` of the live memories of ``dsn`` (``c``'s order)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT m.id::text, u.lexeme, coalesce(u.positions, '{1}') "
            "FROM memories m, unnest(m.search) u WHERE m.deleted_at IS NULL").fetchall()
    return Windows(c.ids, [(str(m), str(lx), list(p)) for m, lx, p in rows], width, stride)


def scaled(x: Array, among: Array | None = None) -> Array:
    """``x`` scaled to 0..1 between its least and greatest value ``among`` those (a mask; by
    default its positive values), 0 elsewhere: how ADR 0094 scales each list."""
    among = x > 0 if among is None else among
    out = np.zeros(len(x))
    if among.any():
        lo, hi = x[among].min(), x[among].max()
        out[among] = (x[among] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def rank_of(score: Array, wanted: set[int]) -> int:
    """The best rank (0-based) of a wanted memory in ``score``'s order."""
    order = np.argsort(-score, kind="stable")
    return int(min(np.where(np.isin(order, list(wanted)))[0]))


def query_lexemes(dsn: str, texts: list[str]) -> list[list[str]]:
    """Each text's lexemes, as the candidate statement reads them."""
    with psycopg.connect(dsn) as conn:
        return [[str(r[0]) for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', %s))", (t,))] for t in texts]


def candidates(c: Corpus, weights: dict[str, float], bm25: Array) -> Array:
    """The server's full-text candidates (ADR 0093): every memory holding a rare lexeme;
    then, when the others' bound could beat the limit-th score, the pool newest AND matches
    of the query's lexemes (OR when fewer than the limit)."""
    cols = {lx: c.vocab.get(lx) for lx in weights}
    df = {lx: (c.df[j] if j is not None else c.n * c.f0) for lx, j in cols.items()}
    rare = {lx for lx in weights
            if df[lx] <= POOL and sum(df[o] for o in weights if df[o] < df[lx]) < POOL}
    mask = np.zeros(c.n, bool)
    for lx in rare:
        j = cols[lx]
        if j is not None:
            mask |= c.tf[:, j] > 0
    kth = np.sort(bm25[mask])[::-1][LIMIT - 1] if mask.sum() >= LIMIT else 0.0
    bound = sum(weights[lx] * (c.idf[j] if j is not None else c.idf0) * (K1 + 1)
                for lx, j in cols.items() if lx not in rare)
    if kth < bound:
        held = [j for j in cols.values() if j is not None]
        both = (np.all(c.tf[:, held] > 0, axis=1) if len(held) == len(cols)
                else np.zeros(c.n, bool))
        if both.sum() < LIMIT and held:
            both = np.any(c.tf[:, held] > 0, axis=1)
        newest = np.where(both)[0]
        mask[newest[np.argsort(-c.updated[newest], kind="stable")][:POOL]] = True
    return mask


def bm25(c: Corpus, weights: dict[str, float], asked_words: set[str] | None = None
         ) -> tuple[Array, Array]:
    """Each memory's full-text score (0 off the candidate list) and its share of the query's
    own rarity weight (``asked_words``: the query's own lexemes when ``weights`` holds words
    fed back)."""
    cols, terms, total = [], [], 0.0
    own_cols, own_terms, own_total = [], [], 0.0
    for lexeme, weight in weights.items():
        j = c.vocab.get(lexeme)
        idf = float(c.idf[j]) if j is not None else c.idf0
        own = asked_words is None or lexeme in asked_words
        total += weight * idf
        own_total += idf if own else 0.0
        if j is not None:
            cols.append(j)
            terms.append(weight * idf)
            if own:
                own_cols.append(j)
                own_terms.append(idf)
    if not cols or total <= 0:
        return np.zeros(c.n), np.zeros(c.n)
    score = c.sat[:, cols] @ np.array(terms, dtype=np.float32)
    score = np.where(candidates(c, weights, score), score, 0)
    got = ((c.tf[:, own_cols] > 0) @ np.array(own_terms, dtype=np.float32) if own_cols
           else np.zeros(c.n))
    return score / total, got / own_total if own_total > 0 else got


def similarity(c: Corpus, model: str, query: Array, mode: str = "best",
               alpha: float = 0.0) -> Array:
    """Each memory's similarity to ``query``: its best passage's (as the server), or that
    mixed with the mean of its passages' vectors (``mean``), passage 0 (``first``) or its
    second best passage (``second``), ``alpha`` of the other."""
    owner, passage, matrix = c.vectors[model]
    sims = matrix @ (query / np.linalg.norm(query)).astype(np.float32)
    best = np.full(c.n, -np.inf, dtype=np.float32)
    np.maximum.at(best, owner, sims)
    if mode == "best":
        return best
    other = np.full(c.n, -np.inf, dtype=np.float32)
    if mode == "mean":
        if model not in c.means:
            mean = np.zeros((c.n, matrix.shape[1]), dtype=np.float32)
            np.add.at(mean, owner, matrix)
            c.means[model] = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True),
                                               1e-9)
        other = c.means[model] @ (query / np.linalg.norm(query)).astype(np.float32)
    elif mode == "first":
        other[owner[passage == 0]] = sims[passage == 0]
    elif mode == "second":
        order = np.lexsort((-sims, owner))
        o = owner[order]
        rank = np.arange(len(o)) - np.searchsorted(o, o)
        other[o[rank == 1]] = sims[order][rank == 1]
        other = np.where(np.isfinite(other), other, best)
    else:
        raise ValueError(mode)
    return (1 - alpha) * best + alpha * other


def fuse(fts: Array, cov: Array, sims: Array | None) -> Array:
    """Each memory's relevance as store/recall.py fuses (-inf off both lists)."""
    weight, floor = store_recall.FULLTEXT_WEIGHT, store_recall.MATCH_FLOOR
    relevance = np.full(len(fts), -np.inf)
    matched = fts > 0
    if sims is None:
        relevance[matched] = fts[matched]
        return relevance
    f = scaled(fts, matched & (cov >= floor))
    near = np.zeros(len(fts), dtype=bool)
    near[np.argsort(-sims, kind="stable")[:store_recall.DEFAULT_VECTOR_POOL]] = True
    v = scaled(sims, near)
    listed = matched | near
    relevance[listed] = weight * f[listed] + (1 - weight) * v[listed]
    return relevance


def top(relevance: Array, fts: Array, k: int = LIMIT) -> list[int]:
    """The ``k`` best, ties by full-text score, then position."""
    listed = np.where(np.isfinite(relevance))[0]
    return sorted(listed, key=lambda d: (-relevance[d], -fts[d], d))[:k]


def fed_back(c: Corpus, first: list[int], relevance: Array, own: dict[str, float], *,
             memories: int = 2, words: int = 30, keep: float = 0.8) -> dict[str, float]:
    """RM3 (ADR 0144): the ``words`` heaviest lexemes of the first answer's best
    ``memories`` by P(w|R), the query's own keeping ``keep`` of the weight."""
    best = first[:memories]
    scores = np.array([max(float(relevance[d]), 0.0) for d in best])
    shares = scores / scores.sum() if scores.sum() > 0 else np.full(len(best), 1 / len(best))
    p = sum(s * c.tf[d] / max(float(c.length[d]), 1.0) for s, d in zip(shares, best, strict=True))
    p = np.asarray(p, dtype=np.float64)
    heaviest = np.argsort(-p)[:words]
    mass = p[heaviest].sum()
    out: dict[str, float] = defaultdict(float)
    for lexeme, weight in own.items():
        out[lexeme] += keep * weight / sum(own.values())
    for j in heaviest:
        if p[j] > 0:
            out[c.words[j]] += (1 - keep) * p[j] / mass
    return dict(out)


def scores(found: list[list[int]], wanted: list[set[int]], kinds: list[str]
           ) -> dict[str, dict[str, float]]:
    """R@5, R@10 and MRR@10, overall and per kind."""
    def of(idx: list[int]) -> dict[str, float]:
        n = len(idx) or 1
        return {"r@5": round(sum(bool(set(found[i][:5]) & wanted[i]) for i in idx) / n, 3),
                "r@10": round(sum(bool(set(found[i][:10]) & wanted[i]) for i in idx) / n, 3),
                "mrr@10": round(sum(next((1 / (k + 1) for k, d in enumerate(found[i][:10])
                                          if d in wanted[i]), 0.0) for i in idx) / n, 3)}
    out = {"all": of(list(range(len(found))))}
    for kind in sorted(set(kinds)):
        out[kind] = of([i for i, k in enumerate(kinds) if k == kind])
    return out


def run_methods(c: Corpus, model: str, lexemes: list[list[str]], vectors: Array,
                wanted: list[set[int]], kinds: list[str], windows: Windows | None = None
                ) -> dict[str, Any]:
    """Full text, hybrid, hybrid with RM3, with each passage mix and (``windows``) with the
    lexical half's best window, over one set; and the share of queries whose answer is in
    the top k of either list."""
    found: dict[str, list[list[int]]] = defaultdict(list)
    within: dict[str, int] = defaultdict(int)
    for i, words in enumerate(lexemes):
        own = dict.fromkeys(words, 1.0)
        fts, cov = bm25(c, own)
        sims = similarity(c, model, vectors[i])
        relevance = fuse(fts, cov, sims)
        found["full text"].append(top(fuse(fts, cov, None), fts))
        found["hybrid"].append(top(relevance, fts))
        ranks = [rank_of(np.where(fts > 0, fts, -1.0), wanted[i]), rank_of(sims, wanted[i])]
        if windows is not None:
            best = np.where(fts > 0, windows.best(words), 0.0)
            ranks.append(rank_of(np.where(fts > 0, best, -1.0), wanted[i]))
            for share in (0.3, 0.5):
                lexical = np.where(fts > 0, share * scaled(fts) + (1 - share) * scaled(best),
                                   0.0)
                found[f"full text, {share} document + {1 - share} best window"].append(
                    top(np.where(fts > 0, lexical, -np.inf), fts))
                found[f"hybrid, lexical {share} document + {1 - share} best window"].append(
                    top(fuse(lexical, cov, sims), fts))
        for k in (5, 10, 20):
            within[f"in the top {k} of a list"] += min(ranks) < k
        weights = fed_back(c, top(relevance, fts, 2), relevance, own)
        again, again_cov = bm25(c, weights, set(own))
        found["hybrid + RM3 (2 memories, 30 words, 0.8)"].append(
            top(fuse(again, again_cov, sims), again))
        for mode, alpha in (("mean", 0.2), ("first", 0.2), ("second", 0.3)):
            mixed = similarity(c, model, vectors[i], mode, alpha)
            found[f"hybrid, best passage + {alpha} {mode}"].append(
                top(fuse(fts, cov, mixed), fts))
    out: dict[str, Any] = {name: scores(f, wanted, kinds) for name, f in found.items()}
    out["ceiling"] = {k: round(v / max(len(lexemes), 1), 3) for k, v in within.items()}
    return out


def longmemeval(dsn: str, embedder: str) -> dict[str, Any]:
    """The methods over a database bench/longmemeval.py prepared with ``embedder``."""
    questions = asked(oracle())
    c = Corpus(dsn, [MODELS[embedder]])
    by_title = {c.titles[i]: n for n, i in enumerate(c.ids)}
    wanted = [{by_title[opaque(s)] for s in q["answer_session_ids"]} for q in questions]
    texts = [str(q["question"]) for q in questions]
    model: Any = build_embedder(embedder)
    vectors = np.array(model.embed_now(texts), dtype=np.float32)
    return run_methods(c, MODELS[embedder], query_lexemes(dsn, texts), vectors, wanted,
                       [str(q["question_type"]) for q in questions], windows_of(dsn, c))


def quality(dsn: str, embedder: str) -> dict[str, Any]:
    """The methods over bench/quality.py's sets, copied into ``replay_quality`` on the same
    server once (times spread over a year), embedded here; paraphrases sharing a lexeme
    with their target dropped, as bench/quality.py does."""
    mems, queries = build(memories=2000, lexical=150, paraphrase=200)
    held_mems, held_queries = heldout.build()
    mems, queries = mems + held_mems, queries + held_queries
    target = with_dbname(dsn, "replay_quality")
    with psycopg.connect(with_dbname(dsn, "postgres"), autocommit=True) as conn:
        new = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'replay_quality'"
                           ).fetchone() is None
        if new:
            conn.execute('CREATE DATABASE "replay_quality" TEMPLATE template0')
    if new:
        asyncio.run(migrate(target))
        rng, now = random.Random(2000), datetime.now(UTC)
        with (psycopg.connect(target) as conn, conn.cursor() as cur,
              cur.copy("COPY memories (id, namespace, title, content, tags, metadata, "
                       "author, created_at, updated_at) FROM STDIN") as copy):
            for m in mems:
                when = now - timedelta(seconds=rng.randint(0, 365 * 86400))
                copy.write_row((uuid.uuid5(uuid.NAMESPACE_OID, str(m.key)), "quality",
                                "", m.content, [], "{}", "bench", when, when))
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE memories")
    c = Corpus(target, [])
    at = {i: n for n, i in enumerate(c.ids)}
    row = {m.key: at[str(uuid.uuid5(uuid.NAMESPACE_OID, str(m.key)))] for m in mems}
    model: Any = build_embedder(embedder)
    ordered = sorted(mems, key=lambda m: row[m.key])
    matrix = np.array(model.embed_now([m.content for m in ordered]), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    c.vectors["set"] = (np.arange(c.n), np.zeros(c.n, dtype=np.int64), matrix)
    lexemes = query_lexemes(target, [q.text for q in queries])
    kept = [(q, words) for q, words in zip(queries, lexemes, strict=True)
            if q.kind != "paraphrase" or not any(
                c.vocab.get(w) is not None and c.tf[row[q.target], c.vocab[w]] > 0
                for w in words)]
    vectors = np.array(model.embed_now([q.text for q, _ in kept]), dtype=np.float32)
    kinds = [("heldout_" if q.target >= heldout.KEY_BASE else "") + q.kind for q, _ in kept]
    return run_methods(c, "set", [w for _, w in kept], vectors,
                       [{row[q.target]} for q, _ in kept], kinds, windows_of(target, c))


def main(argv: list[str]) -> int:
    """``python -m bench.replay EMBEDDER [DSN]``: DSN (default ``BENCH_LONGMEMEVAL_DSN``) the
    database holding EMBEDDER's vectors of LongMemEval's sessions."""
    embedder = argv[0] if argv else "minilm"
    dsn = argv[1] if len(argv) > 1 else os.environ["BENCH_LONGMEMEVAL_DSN"]
    print(json.dumps({"longmemeval": longmemeval(dsn, embedder),
                      "quality": quality(dsn, embedder)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
