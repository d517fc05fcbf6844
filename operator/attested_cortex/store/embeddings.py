"""Embedding rows (``memory_embeddings``, migration 0007; passages: docs/adr/0096): write,
find stale, count, forget.
Called by the service layer's write paths and its background backfill.

A row holds one passage's vector of a memory (passage 0 from its beginning; a memory longer
than the model's window has more), the model and dimension that made it and the memory revision
it was made from; a memory's rows are written together. A row is *current* for an embedder when
its model and dimension are the embedder's and its revision is the memory's; anything else is
stale and the backfill replaces it. Vectors travel as pgvector's text form (``[1,2,3]``), so
the server needs no pgvector client library.

Each row also records the passage ``scheme`` it was written under (migration 0041,
docs/adr/0140): rows written before windows existed for the model (before ADR 0096 for
MiniLM, ADR 0136 for the static model) have scheme 0 and only passage 0. For an embedder that
cuts windows, such a row of a memory that may be longer than one window is stale too, so the
backfill gives the memory its windows once; a row of this build's scheme never is.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from attested_cortex.store.database import Conn
from attested_cortex.store.errors import translating
from attested_cortex.store.memory_ciphers import cipher_of, open_row


@dataclass(frozen=True)
class Pending:
    """A live memory whose embedding is missing or stale."""

    id: uuid.UUID
    revision: int
    text: str
    updated_at: datetime



#: The passage scheme this build writes (docs/adr/0140): 1, the whole text's vector as
#: passage 0 and one per window of a windowing embedder (ADRs 0096, 0136).
SCHEME = 1
#: A text of at most this many bytes is one window for every tokenizer we window with (a
#: token covers at least one byte; the window is 128 tokens): its scheme-0 row stays current
#: and the scheme upgrade never reads it.
ONE_WINDOW_BYTES = 64


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text input form of ``vector``."""
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def embedding_text(title: str, content: str) -> str:
    """What a memory's vector is made from: its title, then its content."""
    return f"{title}\n{content}" if title else content


MAX_SCAN_TUPLES = 1000


def session_settings(vector_pool: int) -> Callable[[Conn], Awaitable[None]]:
    """A pool ``configure`` step for vector search sessions.

    HNSW returns at most ``hnsw.ef_search`` rows (default 40), so it is raised to the vector
    pool; ``relaxed_order`` iterative scans keep searching when the namespace filter drops
    rows, up to :data:`MAX_SCAN_TUPLES` (pgvector's default, 20000, let a narrow namespace
    filter walk most of a 10k index per query). Placeholders where pgvector is not loaded,
    so harmless without it.
    """
    ef_search = str(max(40, min(vector_pool, 1000)))

    async def configure(conn: Conn) -> None:
        await conn.execute("SELECT set_config('hnsw.ef_search', %s, false), "
                           "set_config('hnsw.iterative_scan', 'relaxed_order', false), "
                           "set_config('hnsw.max_scan_tuples', %s, false)",
                           (ef_search, str(MAX_SCAN_TUPLES)))

    return configure


async def available(conn: Conn) -> bool:
    """Whether this database has the embeddings table (pgvector could be created)."""
    cur = await conn.execute("SELECT to_regclass('memory_embeddings') IS NOT NULL AS ok")
    row = await cur.fetchone()
    return bool(row and row["ok"])


async def has_index(conn: Conn, dim: int) -> bool:
    """Whether the HNSW index for vectors of ``dim`` dimensions exists."""
    cur = await conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AS ok", (f"memory_embeddings_hnsw_{int(dim)}",)
    )
    row = await cur.fetchone()
    return bool(row and row["ok"])


async def create_index(conn: Conn, dim: int) -> None:
    """Create the partial HNSW index for ``dim`` (needs ownership of the table: a role
    without it gets StoragePrivilegeError, a dimension HNSW cannot index StorageError)."""
    d = int(dim)
    with translating():
        await conn.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS memory_embeddings_hnsw_{d} "
            f"ON memory_embeddings USING hnsw ((embedding::vector({d})) vector_cosine_ops) "
            f"WHERE dim = {d}".encode()
        )


#: One memory's vectors, one row per passage (docs/adr/0096): passages past the new count
#: are dropped, each given one replaces its row. Never over a newer revision's rows of the
#: same model (a late write-behind batch after an update), never for a tombstone.
_UPSERT = """
WITH trimmed AS (
    DELETE FROM memory_embeddings
    WHERE memory_id = %(id)s AND passage >= cardinality(%(vectors)s::text[])
      AND (model <> %(model)s OR dim <> %(dim)s OR revision <= %(revision)s)
)
INSERT INTO memory_embeddings (memory_id, passage, model, dim, revision, embedding{col})
SELECT %(id)s, p.n - 1, %(model)s, %(dim)s, %(revision)s, p.v::vector{val}
FROM unnest(%(vectors)s::text[]) WITH ORDINALITY AS p(v, n)
WHERE EXISTS (SELECT 1 FROM memories WHERE id = %(id)s AND deleted_at IS NULL)
  AND NOT EXISTS (SELECT 1 FROM memory_embeddings x
                  WHERE x.memory_id = %(id)s AND x.passage = 0 AND x.model = %(model)s
                    AND x.dim = %(dim)s AND x.revision > %(revision)s)
ON CONFLICT (memory_id, passage) DO UPDATE
SET model = EXCLUDED.model, dim = EXCLUDED.dim, revision = EXCLUDED.revision,
    embedding = EXCLUDED.embedding, embedded_at = clock_timestamp(){set}
WHERE memory_embeddings.model <> EXCLUDED.model OR memory_embeddings.dim <> EXCLUDED.dim
   OR memory_embeddings.revision <= EXCLUDED.revision
"""

#: The upsert of a schema with ``scheme`` (migration 0041), and of an older one (a server
#: may run on a schema not migrated yet: its rows are of scheme 0, as the default makes them).
_UPSERTS = {True: _UPSERT.format(col=", scheme", val=", %(scheme)s",
                                 set=",\n    scheme = EXCLUDED.scheme"),
            False: _UPSERT.format(col="", val="", set="")}


async def has_scheme(conn: Conn) -> bool:
    """Whether vector rows record their passage scheme (migration 0041)."""
    cur = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'memory_embeddings'::regclass"
        " AND attname = 'scheme' AND NOT attisdropped) AS ok")
    row = await cur.fetchone()
    return bool(row and row["ok"])


#: A memory's vectors: one per passage, the first from its beginning.
Passages = Sequence[Sequence[float]]


async def put(
    conn: Conn, *, memory_id: uuid.UUID, revision: int, model: str,
    vector: Sequence[float] | None = None, passages: Passages | None = None,
    scheme: bool = True,
) -> None:
    """Record ``vector`` (or each of ``passages``) for ``memory_id`` at ``revision``; never
    replaces a newer revision's rows of the same model, never writes for a tombstone."""
    given = passages if passages is not None else [vector or []]
    await conn.execute(_UPSERTS[scheme],
                       _upsert_params(model, [(memory_id, revision, given)])[0])


async def put_many(
    conn: Conn, *, model: str, rows: Sequence[tuple[uuid.UUID, int, Passages]],
    scheme: bool = True,
) -> None:
    """:func:`put` for a batch of memories' passages (one round trip). The vectors' text
    forms are made in a worker thread: about 0.1 ms of Python per vector, so 7 ms or more per
    batch of 64 that held the event loop, and every request the server was answering
    meanwhile, while a backfill ran (found by the kg bench, docs/adr/0076)."""
    params = await asyncio.to_thread(_upsert_params, model, rows)
    async with conn.cursor() as cur:
        await cur.executemany(_UPSERTS[scheme], params)


def _upsert_params(model: str, rows: Sequence[tuple[uuid.UUID, int, Passages]],
                   ) -> list[dict[str, Any]]:
    return [{"id": mid, "model": model, "dim": len(vectors[0]), "revision": rev,
             "scheme": SCHEME, "vectors": [vector_literal(v) for v in vectors]}
            for mid, rev, vectors in rows]


async def forget(conn: Conn, memory_id: uuid.UUID) -> None:
    """Drop a memory's vector (its content is gone: a tombstone keeps no meaning either)."""
    await conn.execute("DELETE FROM memory_embeddings WHERE memory_id = %s", (memory_id,))


#: A memory written before its model's windows (docs/adr/0140): only passage 0, of scheme 0,
#: and longer than one window may be (the bytes of a sealed row's ciphertext count, which
#: are more than its text's). Asked only for an embedder that windows.
_UNWINDOWED = """
  OR (e.scheme < %(scheme)s
      AND octet_length(coalesce(m.title, '')) + octet_length(m.content)
          + coalesce(octet_length(m.sealed), 0) > %(one_window)s)
"""

_STALE = """
FROM memories m LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.passage = 0
WHERE m.deleted_at IS NULL
  AND (e.memory_id IS NULL OR e.model <> %(model)s OR e.dim <> %(dim)s
       OR e.revision <> m.revision{unwindowed})
"""


_WINDOW = """
WITH w AS (
    SELECT m.id, m.namespace, m.revision, m.title, m.content, m.updated_at, m.key_version,
           m.sealed
    FROM memories m
    WHERE m.deleted_at IS NULL {after}
    ORDER BY m.updated_at DESC, m.id DESC LIMIT %(window)s
)
SELECT w.*, (e.memory_id IS NULL OR e.model <> %(model)s OR e.dim <> %(dim)s
             OR e.revision <> w.revision{unwindowed}) AS stale
FROM w LEFT JOIN memory_embeddings e ON e.memory_id = w.id AND e.passage = 0
ORDER BY w.updated_at DESC, w.id DESC
"""


@dataclass(frozen=True)
class Window:
    """One step of a backfill pass: the stale memories among ``scanned`` rows, and where
    the pass goes on (None: the pass is over)."""

    stale: list[Pending]
    scanned: int
    next: tuple[datetime, uuid.UUID] | None


#: Which namespaces the caller keeps no vectors for (``encryption.sealed_namespaces``,
#: ADR 0057 item 2): the store knows no pattern, the service passes its matcher.
Skip = Callable[[str], bool]


def _params(model: str, dim: int) -> dict[str, object]:
    return {"model": model, "dim": dim, "scheme": SCHEME, "one_window": ONE_WINDOW_BYTES}


def _unwindowed(windows: bool, alias: str) -> str:
    """The clause of :data:`_UNWINDOWED` where asked (none: a schema without ``scheme``
    is never asked, docs/adr/0140)."""
    return _UNWINDOWED.replace("m.", f"{alias}.") if windows else ""


async def stale(
    conn: Conn, *, model: str, dim: int, window: int,
    after: tuple[datetime, uuid.UUID] | None = None, skip: Skip | None = None,
    windows: bool = False,
) -> Window:
    """The stale memories among the next ``window`` live ones (most recently updated first)
    after ``after``, none of a namespace ``skip`` names.

    A pass walks the recency index once, a bounded window per step: an anti-join of all
    memories per batch made PostgreSQL hash-join the whole table each time (and restarting
    from the top stepped over every row embedded so far: 37 rows/s after 37k of 100k).
    ``windows``: the embedder cuts windows, so a memory written before them is stale too.
    """
    params = _params(model, dim) | {"window": window}
    clause = ""
    if after is not None:
        clause = "AND (m.updated_at, m.id) < (%(at)s, %(id)s)"
        params.update(at=after[0], id=after[1])
    cur = await conn.execute(
        _WINDOW.format(after=clause, unwindowed=_unwindowed(windows, "w")), params)
    rows = await cur.fetchall()
    found = [Pending(r["id"], r["revision"], embedding_text(*text), r["updated_at"])
             for r in rows if r["stale"] and not (skip is not None and skip(r["namespace"]))
             and (text := _text_of(conn, r)) is not None]
    last = rows[-1] if len(rows) == window else None
    return Window(found, len(rows), None if last is None else (last["updated_at"], last["id"]))


def _text_of(conn: Conn, row: dict[str, Any]) -> tuple[str, str] | None:
    """A row's title and content, a sealed one opened (ADR 0057: its vector stays plain);
    None for a sealed row that does not open (nothing to embed)."""
    if row["key_version"] is None:
        return row["title"], row["content"]
    opened = open_row(cipher_of(conn), row)
    return None if opened.unreadable else (opened.title, opened.content)


async def count_stale(conn: Conn, *, model: str, dim: int, skip: Skip | None = None,
                      windows: bool = False) -> int:
    """How many live memories lack a current vector (none of a namespace ``skip`` names)."""
    params = _params(model, dim)
    where = _STALE.format(unwindowed=_unwindowed(windows, "m"))
    if skip is None:
        cur = await conn.execute("SELECT count(*) AS n " + where, params)
        row = await cur.fetchone()
        return int(row["n"]) if row else 0
    cur = await conn.execute("SELECT m.namespace, count(*) AS n " + where
                             + " GROUP BY m.namespace", params)
    return sum(int(r["n"]) for r in await cur.fetchall() if not skip(r["namespace"]))


#: Every namespace memories use, one probe of the namespace index each (a loose index
#: scan: the backfill asks on every pass, so its cost follows the namespaces, not the rows).
_NAMESPACES = """
WITH RECURSIVE ns AS (
    (SELECT namespace FROM memories ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT m.namespace FROM memories m WHERE m.namespace > ns.namespace
            ORDER BY m.namespace LIMIT 1)
    FROM ns WHERE ns.namespace IS NOT NULL
)
SELECT namespace FROM ns WHERE namespace IS NOT NULL
"""


async def drop_covered(conn: Conn, skip: Skip) -> int:
    """Drop the vectors of memories in namespaces ``skip`` names (a namespace marked sealed
    after its memories were embedded: ADR 0057 item 2); how many went."""
    cur = await conn.execute(_NAMESPACES)
    covered = [r["namespace"] for r in await cur.fetchall() if skip(r["namespace"])]
    if not covered:
        return 0
    cur = await conn.execute(
        "DELETE FROM memory_embeddings e USING memories m "
        "WHERE m.id = e.memory_id AND m.namespace = ANY(%s)", (covered,))
    return cur.rowcount


async def purge_tombstoned(conn: Conn) -> int:
    """Drop vectors of memories deleted since (a crash between the two writes)."""
    cur = await conn.execute(
        "DELETE FROM memory_embeddings e USING memories m "
        "WHERE m.id = e.memory_id AND m.deleted_at IS NOT NULL"
    )
    return cur.rowcount
