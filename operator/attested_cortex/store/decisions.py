"""Decisions a cortex makes once and keeps with its data (migration 0028, ADR 0079).

``encryption.at_rest`` left unset is the first: :func:`at_rest_default` answers it the same
for every start and every replica, whatever the database holds by then.
"""

from __future__ import annotations

from typing import Final

import psycopg

from attested_cortex.errors import SchemaMissingError
from attested_cortex.store.database import AnyConn

AT_REST: Final = "encryption.at_rest"

#: One statement: the first server to ask records whether the database holds no plain row (no
#: live memory and no unpruned transcript without a key version), the rest read that row.
_DECIDE = """
WITH decided AS (
    INSERT INTO cortex_decisions (name, value)
    SELECT %s, to_jsonb(
        NOT EXISTS (SELECT 1 FROM memories WHERE key_version IS NULL AND deleted_at IS NULL)
        AND NOT EXISTS (SELECT 1 FROM transcripts
                        WHERE key_version IS NULL AND pruned_at IS NULL))
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM decided
UNION ALL
SELECT value FROM cortex_decisions WHERE name = %s AND NOT EXISTS (SELECT 1 FROM decided)
"""
#: A decision recorded by a server that raced this one (committed after the statement's
#: snapshot, so neither half of :data:`_DECIDE` answered).
_READ = "SELECT value FROM cortex_decisions WHERE name = %s"


async def at_rest_default(conn: AnyConn) -> bool | None:
    """Whether this cortex seals rows at rest when its setting is unset (ADR 0079): on for a
    database that held no plain memory or transcript when a server with a master key first
    asked (new, or every row sealed), off for one holding plain data from before; decided
    once. None: not migrated to 0028 (the caller keeps rows plain and decides nothing)."""
    try:
        row = await (await conn.execute(_DECIDE, (AT_REST, AT_REST))).fetchone()
        if row is None:
            row = await (await conn.execute(_READ, (AT_REST,))).fetchone()
    except (SchemaMissingError, psycopg.errors.UndefinedTable):  # translated or not yet
        return None
    assert row is not None  # recorded by this statement or the one that raced it
    return bool(row["value"] if isinstance(row, dict) else row[0])
