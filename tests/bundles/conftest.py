"""Fixtures of the bundle tests: a signed source cortex with every kind of row, its bundle,
and empty migrated targets (copies of the session's migrated template)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE, PgServer
from psycopg import sql

from attested_cortex.attest.keyfiles import PRIVATE_FILE, write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.loading import load_snapshot
from attested_cortex.bundles import DirectorySink, export_bundle
from attested_cortex.store.dumping import owner_connection
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex

WRITER = "dev:tester"
PEER = "dev:agent-b"
# Reads unrecorded: the round trip compares a source's and its import's answers, audit
# report included, and each side's own reads would add events of its own.
SERVER = {"keys_dir": None, "graph_backend": "CTE", "embedder": "none", "audit_signer": WRITER,
          "transcripts": {"enabled": True, "namespaces": [{"namespace": "kb/**"}]},
          "audit": {"record_reads": False}}
DIALOGUE = "user: why did the deploy fail?\nagent: the migration waited on a lock.\n" * 4


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    root = tmp_path / "keys"
    write_identity(root / "tester", generate_key(AgentId(WRITER)))
    write_identity(root / "agent-b", generate_key(AgentId(PEER)))
    (root / "agent-b" / PRIVATE_FILE).unlink()
    return root


@pytest.fixture
def new_target(pg15_server: PgServer, pg15_template: str) -> Iterator[Callable[[], str]]:
    """Factory of empty databases at the current schema."""
    made: list[str] = []

    def factory() -> str:
        name = f"cortex_{uuid.uuid4().hex[:12]}"
        _admin(pg15_server, sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(pg15_template)))
        made.append(name)
        return pg15_server.dsn(name)

    yield factory
    for name in made:
        _admin(pg15_server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def _admin(server: PgServer, statement: sql.Composed) -> None:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(statement)


async def serve(make_cortex: MakeCortex, dsn: str, keys: Path) -> CortexClient:
    await migrate(dsn, app_role=APP_ROLE)
    return await make_cortex(dsn, migrated=False, **{**SERVER, "keys_dir": keys})


@pytest.fixture
async def source(make_cortex: MakeCortex, new_target: Callable[[], str],
                 keys: Path) -> CortexClient:
    """A cortex with updated and deleted memories, signed and invalidated links, a
    transcript cited by a memory, and usage counters."""
    client = await serve(make_cortex, new_target(), keys)
    transcript = await _ok(client, "POST", "/v1/transcripts",
                           {"namespace": "kb/ops", "content": DIALOGUE})
    ids = []
    for n in range(60):
        body: dict[str, Any] = {"namespace": f"kb/{'ops' if n % 2 else 'dev'}",
                                "content": f"deploy note {n}: lock waits on table t{n % 7}",
                                "title": f"note {n}", "tags": [f"t{n % 5}"]}
        if n == 0:
            body["citations"] = [{"transcript_id": transcript["id"], "start": 0, "end": 40}]
        ids.append((await _ok(client, "POST", "/v1/memories", body))["id"])
    for n in range(0, 60, 6):
        await _ok(client, "PATCH", f"/v1/memories/{ids[n]}", {"content": f"edited note {n}"})
    for n in range(1, 40, 3):
        link = await _ok(client, "POST", "/v1/links",
                         {"src_id": ids[n], "dst_id": ids[n + 1], "relation": "related_to"})
        if n % 9 == 1:
            await _ok(client, "POST", "/v1/kg/invalidate", {"link_id": link["id"]})
    for n in range(5, 60, 10):
        await _ok(client, "DELETE", f"/v1/memories/{ids[n]}", None)
    client.extra["ids"] = ids
    return client


async def _ok(client: CortexClient, method: str, path: str, body: Any) -> Any:
    reply = await client.call(method, path, body)
    assert reply.status in (200, 201, 204), reply.text
    return reply.body


@pytest.fixture
async def bundle(source: CortexClient, keys: Path, tmp_path: Path) -> Path:
    """The source's bundle, signed by the writer's key."""
    out = tmp_path / "bundle"
    snapshot = load_snapshot(keys)
    async with owner_connection(source.dsn) as conn:
        await export_bundle(conn, DirectorySink(out), keyring=snapshot.keyring,
                            signer=snapshot.signing_keys[AgentId(WRITER)])
    return out
