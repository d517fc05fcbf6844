"""Fixtures for the attestation tests: a migrated database and the least-privilege app role.

``cortexctl migrate`` is expected to grant the server role SELECT and INSERT on
signed_events and signed_event_macs (the chain trigger reads the previous MAC; see
docs/attestation.md); until it takes the role as an option, the
``chain_db`` fixture applies exactly that grant itself, as the superuser.
"""

from __future__ import annotations

import psycopg
import pytest

from attested_cortex.store import migrating
from tests.support.postgres import Database

APP_GRANT = "GRANT SELECT, INSERT ON signed_events, signed_event_macs TO cortex_app"


@pytest.fixture
async def chain_db(pg15_database: Database) -> Database:
    """A fresh PostgreSQL 15 database at the newest schema, with the app role's grant."""
    await migrating.migrate(pg15_database.dsn, graph=False)
    async with await psycopg.AsyncConnection.connect(pg15_database.dsn, autocommit=True) as conn:
        await conn.execute(APP_GRANT)
    return pg15_database
