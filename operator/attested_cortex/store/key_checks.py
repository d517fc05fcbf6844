"""The master key versions a cortex was sealed with (migration 0031, ADR 0088): each
version's public fingerprint, recorded by the first server that starts with it.

Called by :func:`attested_cortex.server.assembling.open_services` at start-up (through
:func:`attested_cortex.server.configuring.check_master_key`), before anything is opened,
and by the ring reloader when a reloaded ring brings a new version. Fingerprints only: the
key never reaches this layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from attested_cortex.errors import SchemaMissingError
from attested_cortex.store.database import AnyConn

_READ = "SELECT key_version, fingerprint FROM master_key_checks"
#: A version not recorded yet is recorded; a racing server's row wins (then read back).
_RECORD = ("INSERT INTO master_key_checks (key_version, fingerprint) SELECT v, f FROM "
           "unnest(%s::int[], %s::text[]) AS u(v, f) ON CONFLICT (key_version) DO NOTHING")


async def recorded(conn: AnyConn) -> dict[int, str] | None:
    """The recorded fingerprint of every key version (None: not migrated to 0031)."""
    try:
        cur = await conn.execute(_READ)
        rows = await cur.fetchall()
    except (SchemaMissingError, psycopg.errors.UndefinedTable):
        return None
    return {int(_at(r, 0, "key_version")): str(_at(r, 1, "fingerprint")) for r in rows}


async def record(conn: AnyConn, fingerprints: Mapping[int, str]) -> dict[int, str] | None:
    """Record the versions of ``fingerprints`` not recorded yet; every recorded one after
    (None: not migrated to 0031)."""
    try:
        versions = sorted(fingerprints)
        await conn.execute(_RECORD, (versions, [fingerprints[v] for v in versions]))
    except (SchemaMissingError, psycopg.errors.UndefinedTable):
        return None
    return await recorded(conn)


#: Whether the database holds what only a server with a key writes: a recorded key version,
#: a MAC of the keyed chain (migration 0014), or the decision to seal at rest (0028). Each
#: an index probe or a one-row table: cheap at every keyless start.
_KEYED = """
SELECT EXISTS (SELECT 1 FROM master_key_checks)
    OR EXISTS (SELECT 1 FROM signed_event_macs)
    OR EXISTS (SELECT 1 FROM cortex_decisions
               WHERE name = 'encryption.at_rest' AND value = 'true'::jsonb) AS keyed
"""


async def keyed(conn: AnyConn) -> bool:
    """Whether a master key is required to serve this cortex (False before migration
    0031: nothing to go by)."""
    try:
        row = await (await conn.execute(_KEYED)).fetchone()
    except (SchemaMissingError, psycopg.errors.UndefinedTable):
        return False
    return row is not None and bool(_at(row, 0, "keyed"))


def _at(row: Any, index: int, name: str) -> Any:
    """A column of a dict or tuple row (the start-up connection may be either)."""
    return row[name] if isinstance(row, dict) else row[index]
