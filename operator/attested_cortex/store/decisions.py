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

#: The recorded decision: what every start after the first reads, and all it reads.
_READ = "SELECT value FROM cortex_decisions WHERE name = %s"
#: The first start's: whether the database holds no plain row (no live memory and no unpruned
#: transcript without a key version), recorded unless a server racing this one recorded it
#: first (then nothing is returned, and :data:`_READ` answers). The scans for plain rows run
#: only here, once per cortex, not at every start.
_DECIDE = """
INSERT INTO cortex_decisions (name, value)
SELECT %s, to_jsonb(
    NOT EXISTS (SELECT 1 FROM memories WHERE key_version IS NULL AND deleted_at IS NULL)
    AND NOT EXISTS (SELECT 1 FROM transcripts WHERE key_version IS NULL AND pruned_at IS NULL))
ON CONFLICT (name) DO NOTHING
RETURNING value
"""


async def at_rest_default(conn: AnyConn) -> bool | None:
    """Whether this cortex seals rows at rest when its setting is unset (ADR 0079): on for a
    database that held no plain memory or transcript when a server with a master key first
    asked (new, or every row sealed), off for one holding plain data from before; decided
    once. None: not migrated to 0028 (the caller keeps rows plain and decides nothing)."""
    try:
        row = await (await conn.execute(_READ, (AT_REST,))).fetchone()
        if row is None:  # the first start: decide
            row = await (await conn.execute(_DECIDE, (AT_REST,))).fetchone()
        if row is None:  # a racing server recorded it first
            row = await (await conn.execute(_READ, (AT_REST,))).fetchone()
    except (SchemaMissingError, psycopg.errors.UndefinedTable):  # translated or not yet
        return None
    assert row is not None  # recorded by this call or by the one that raced it
    return bool(row["value"] if isinstance(row, dict) else row[0])
