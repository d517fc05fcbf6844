"""Recall: full-text search over a bounded candidate pool, ranked by relevance, recency and
namespace proximity. Called by the service layer's recall pipeline.

Ranking every match does not scale (a 3-term OR over common words at 100k memories ranks
tens of thousands of rows), so recall works in two bounded steps, both in one statement:

1. candidates: the ``pool`` most recently updated memories matching the query as an AND
   (``websearch_to_tsquery``); only when those are fewer than ``limit`` does it relax to
   an OR of the same lexemes, again capped at ``pool``;
2. ranking of just those candidates:
   ``score = 0.60 * relevance + 0.25 * recency + 0.15 * proximity`` where relevance is
   ``ts_rank_cd(search, or_query, 32)`` (in [0, 1)), recency is ``1 / (1 + age / 30 days)``
   and proximity is ``1 / (1 + levels between the query namespace and the memory's)``.

Equal scores order by ``updated_at`` (newest first), then ``id``: the order is total, so
the same data always answers the same way. A query namespace ``a/b/c`` searches ``a/b/c``,
``a/b`` and ``a``; without one, every namespace is searched with proximity 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attested_cortex.namespaces import ancestors, depth
from attested_cortex.store.database import Conn
from attested_cortex.store.memories import Memory, memory_from_row

DEFAULT_POOL = 200

_SQL = """
WITH and_c AS (
    SELECT m.id FROM memories m
    WHERE m.deleted_at IS NULL AND m.search @@ websearch_to_tsquery('english', %(query)s)
      {ns_filter}
    ORDER BY m.updated_at DESC LIMIT %(pool)s
),
or_c AS (
    SELECT m.id FROM memories m
    WHERE (SELECT count(*) FROM and_c) < %(limit)s
      AND m.deleted_at IS NULL AND m.search @@ {or_query} {ns_filter}
    ORDER BY m.updated_at DESC LIMIT %(pool)s
),
cand AS (SELECT id FROM and_c UNION SELECT id FROM or_c)
SELECT m.id, m.namespace, m.title, m.content, m.tags, m.metadata, m.author, m.revision,
       m.created_at, m.updated_at, m.deleted_at,
       (0.60 * ts_rank_cd(m.search, {or_query}, 32)
        + 0.25 / (1 + extract(epoch FROM (now() - m.updated_at)) / 2592000.0)
        + 0.15 / (1 + greatest(%(qdepth)s - m.ns_depth, 0)))::float8 AS score
FROM cand JOIN memories m USING (id)
ORDER BY score DESC, m.updated_at DESC, m.id
LIMIT %(limit)s
"""


#: The AND query's lexemes joined by OR (the relaxed form). Written inline, not in a CTE,
#: so the planner sees the query's lexemes and estimates how many rows match: with that
#: estimate it scans the recency index for very common words and the GIN index for rare
#: ones (a CTE hides the lexemes and the plan ranks every match: 430 ms at 100k).
_OR_QUERY = (
    "coalesce(nullif(replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | '), '')"
    "::tsquery, websearch_to_tsquery('english', %(query)s))"
)


@dataclass(frozen=True)
class Hit:
    """A recalled memory and its score."""

    memory: Memory
    score: float


async def recall(
    conn: Conn, *, query: str, namespace: str | None, limit: int, pool: int = DEFAULT_POOL,
) -> list[Hit]:
    """The best ``limit`` memories for ``query``, best first (see the module docstring)."""
    params: dict[str, Any] = {"query": query, "limit": limit, "pool": max(pool, limit)}
    if namespace is None:
        ns_filter = ""
        params["qdepth"] = 0
    else:
        ns_filter = "AND m.namespace = ANY(%(namespaces)s)"
        params["namespaces"] = ancestors(namespace)
        params["qdepth"] = depth(namespace)
    statement = _SQL.format(ns_filter=ns_filter, or_query=_OR_QUERY)
    # Never a prepared statement: a cached generic plan cannot see the query's lexemes and
    # falls back to ranking every match (the plan choice depends on how common they are).
    cur = await conn.execute(statement.encode(), params, prepare=False)
    return [Hit(memory_from_row(row), float(row["score"])) for row in await cur.fetchall()]
