"""Apache AGE setup: the extension, the mirrored graph, its indexes and its bulk backfill.

Callers: ``store.migrating.migrate`` (``ensure_age_graph`` after the SQL migrations, on an
autocommit connection), the server's pool (``configure_age_connection`` on every new
connection), and ``selecting.select_backend`` (``age_ready``).

Idempotent: ``create_graph`` fails when the graph exists, so it runs only when the graph is
absent. The mirror is rebuilt from the relational tables (bulk insert straight into the label
tables, not Cypher CREATE) when it is new or out of step — e.g. links were written while the
CTE backend was live — judged by edge counts (all, and closed windows).
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from attested_cortex.store.graph.cypher import EDGE, GRAPH, ID_EXPR, VERTEX, VU_EXPR
from attested_cortex.store.links import fetch_tuples

_LIVE_LINKS: Final = """
FROM links l
JOIN memories s ON s.id = l.src_id AND s.deleted_at IS NULL
JOIN memories d ON d.id = l.dst_id AND d.deleted_at IS NULL
"""

_COUNTS_SQL: Final = f"""
SELECT
  (SELECT count(*) {_LIVE_LINKS}),
  (SELECT count(*) {_LIVE_LINKS} WHERE l.valid_until IS NOT NULL),
  (SELECT count(*) FROM {EDGE}),
  (SELECT count(*) FROM {EDGE} WHERE {VU_EXPR} IS NOT NULL)
"""

_INDEXES: Final = (
    f"CREATE UNIQUE INDEX IF NOT EXISTS memory_gid ON {VERTEX} (id)",
    f"CREATE UNIQUE INDEX IF NOT EXISTS memory_uuid ON {VERTEX} ({ID_EXPR})",
    f"CREATE INDEX IF NOT EXISTS link_start ON {EDGE} (start_id)",
    f"CREATE INDEX IF NOT EXISTS link_end ON {EDGE} (end_id)",
    f"CREATE UNIQUE INDEX IF NOT EXISTS link_uuid ON {EDGE} ({ID_EXPR})",
)

_BACKFILL: Final = (
    f"TRUNCATE {EDGE}, {VERTEX}",
    "CREATE TEMP TABLE cortex_vmap ON COMMIT DROP AS"
    " SELECT m.id AS memory_id, ag_catalog._graphid("
    f" ag_catalog._label_id('{GRAPH}', 'memory')::integer, nextval('{VERTEX}_id_seq')) AS gid"
    " FROM memories m WHERE m.deleted_at IS NULL",
    "CREATE UNIQUE INDEX ON cortex_vmap (memory_id)",
    f"INSERT INTO {VERTEX} (id, properties) SELECT gid,"
    " jsonb_build_object('id', memory_id)::text::ag_catalog.agtype FROM cortex_vmap",
    f"INSERT INTO {EDGE} (start_id, end_id, properties) SELECT s.gid, d.gid,"
    " jsonb_strip_nulls(jsonb_build_object('id', l.id, 'rel', l.relation,"
    " 'vf', (extract(epoch FROM l.valid_from) * 1000000)::bigint,"
    " 'vu', (extract(epoch FROM l.valid_until) * 1000000)::bigint))::text::ag_catalog.agtype"
    " FROM links l JOIN cortex_vmap s ON s.memory_id = l.src_id"
    " JOIN cortex_vmap d ON d.memory_id = l.dst_id",
    f"ANALYZE {VERTEX}",
    f"ANALYZE {EDGE}",
)


async def configure_age_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """Make a session ready for Cypher: LOAD the library, put ag_catalog on the search path.

    ag_catalog goes after the application's schemas so it never shadows a table name.
    The caller (the pool's configure hook) commits.
    """
    try:
        async with conn.transaction():
            await conn.execute("LOAD 'age'")
    except psycopg.errors.InsufficientPrivilege:
        # LOAD needs superuser. A server that preloads AGE (shared_preload_libraries, as
        # ours does) needs no LOAD, so an unprivileged application role still works there.
        pass
    await conn.execute('SET search_path = "$user", public, ag_catalog')


async def age_available(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server can provide the ``age`` extension at all."""
    rows = await fetch_tuples(conn, "SELECT 1 FROM pg_available_extensions WHERE name = 'age'")
    return bool(rows)


async def age_ready(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the extension is installed and the mirrored graph exists."""
    rows = await fetch_tuples(
        conn,
        "SELECT to_regclass('ag_catalog.ag_graph') IS NOT NULL"
        " AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'age')",
    )
    if not rows[0][0]:
        return False
    rows = await fetch_tuples(conn, "SELECT 1 FROM ag_catalog.ag_graph WHERE name = %s", (GRAPH,))
    return bool(rows)


async def ensure_age_graph(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Create (or repair) the mirrored graph; False where AGE is not available.

    Works on an autocommit connection or inside a caller's transaction; each step is its
    own (sub)transaction so catalog changes are committed before the next one uses them.
    """
    if not await age_available(conn):
        return False
    async with conn.transaction():
        await conn.execute("CREATE EXTENSION IF NOT EXISTS age")
    await configure_age_connection(conn)
    created = await _create_graph(conn)
    async with conn.transaction():
        for statement in _INDEXES:
            await conn.execute(statement)
    if created or not await mirror_in_step(conn):
        await rebuild_mirror(conn)
    return True


async def _create_graph(conn: psycopg.AsyncConnection[Any]) -> bool:
    if await age_ready(conn):
        return False
    async with conn.transaction():
        await conn.execute("SELECT ag_catalog.create_graph(%s)", (GRAPH,))
        await conn.execute("SELECT ag_catalog.create_vlabel(%s, 'memory')", (GRAPH,))
        await conn.execute("SELECT ag_catalog.create_elabel(%s, 'link')", (GRAPH,))
    return True


async def mirror_in_step(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the graph holds exactly the live links (by count, and closed-window count)."""
    links, closed, edges, closed_edges = (await fetch_tuples(conn, _COUNTS_SQL))[0]
    return bool(links == edges and closed == closed_edges)


async def rebuild_mirror(conn: psycopg.AsyncConnection[Any]) -> None:
    """Reload the graph from the relational tables in one transaction (bulk, set-based)."""
    async with conn.transaction():
        await conn.execute(f"LOCK TABLE links, {EDGE}, {VERTEX} IN SHARE ROW EXCLUSIVE MODE")
        for statement in _BACKFILL:
            await conn.execute(statement)
