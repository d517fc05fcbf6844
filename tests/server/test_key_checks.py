"""The cortex knows which master key sealed it (issue 37 item 14, ADR 0088, migration
master_key_checks) on a real server and PostgreSQL.

The first start with a key records each version's public fingerprint. A later start with
another key under the same version label, or with no key at all, is refused before the
server serves anything: ``cortexctl serve`` exits non-zero with a message naming the
setting and the fingerprints (never the key), and nothing is written under the wrong key.
The right key starts and reads as before; a new version joins the record at its first start.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from contextlib import AsyncExitStack
from pathlib import Path

import psycopg
import pytest
from hack.support.served import CORTEXCTL, free_port

from attested_cortex.attest import masterkeys as mk
from attested_cortex.errors import InvalidInputError
from attested_cortex.server.assembling import open_services
from attested_cortex.server.settings import ServerSettings
from attested_cortex.service.workers.ringreloading import RingReloader
from tests.server.test_key_rotation import ring_dir
from tests.support.cortex import MakeCortex


async def refused(dsn: str, **settings: object) -> str:
    """The refusal of a start with these settings (the message)."""
    async with AsyncExitStack() as stack:
        with pytest.raises(InvalidInputError) as caught:
            await open_services(ServerSettings(database_url=dsn, quotas={"enabled": False},
                                               **settings), stack)
    assert caught.value.details.get("field") == "master_key", caught.value.details
    return str(caught.value)


async def test_a_wrong_or_missing_key_stops_start_up(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    dsn = migrated_pg15_dsn
    right, wrong = tmp_path / "right.key", tmp_path / "wrong.key"
    right.write_bytes(mk.generate_key())
    wrong.write_bytes(mk.generate_key())
    cortex = await make_cortex(dsn, migrated=False, master_key={"file": right},
                               encryption={"at_rest": True})
    stored = await cortex.store("kb", "sealed under the right key")
    with psycopg.connect(dsn) as conn:
        before = conn.execute("SELECT count(*) FROM signed_events").fetchone()

    message = await refused(dsn, master_key={"file": wrong})
    loaded = mk.load_key_file(wrong).key()
    assert "v1 is not the key this cortex was sealed with" in message, message
    assert loaded.fingerprint in message and mk.load_key_file(right).key().fingerprint \
        in message
    assert loaded.material.hex() not in message
    assert "has none: start refused" in await refused(dsn)  # no key where one is required
    assert "has none" in await refused(dsn, encryption={"at_rest": False})

    # The real process: non-zero exit, the refusal on stderr, nothing served or written.
    done = await asyncio.to_thread(
        subprocess.run,
        [*CORTEXCTL, "serve", "--database-url", dsn, "--listen", f"127.0.0.1:{free_port()}",
         "--graph-backend", "CTE", "--master-key-file", str(wrong)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 1, done
    assert "not the key this cortex was sealed with" in done.stderr, done.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM signed_events").fetchone() == before
        recorded = conn.execute("SELECT key_version, fingerprint FROM master_key_checks"
                                ).fetchall()
    assert recorded == [(1, mk.load_key_file(right).key().fingerprint)]

    # The right key (and a rotation to a new version beside it) starts and reads.
    ring = ring_dir(tmp_path / "ring", {1: right.read_bytes(), 2: mk.generate_key()}, 2)
    again = await make_cortex(dsn, migrated=False, master_key=ring,
                              encryption={"at_rest": True})
    reply = await again.call("GET", f"/v1/memories/{stored['id']}")
    assert reply.status == 200 and reply.body["content"] == "sealed under the right key"
    with psycopg.connect(dsn) as conn:
        versions = conn.execute("SELECT key_version FROM master_key_checks ORDER BY 1"
                                ).fetchall()
    assert versions == [(1,), (2,)]


async def test_a_reloaded_ring_naming_another_key_is_refused(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """A replica recorded v2 first; this server's Secret then gains another key as v2: the
    ring in use is kept (and says why), the recorded v2 is adopted and a new v3 recorded."""
    dsn, ring = migrated_pg15_dsn, tmp_path / "ring"
    v1, theirs, other, v3 = (mk.generate_key() for _ in range(4))
    cortex = await make_cortex(dsn, migrated=False, master_key=ring_dir(ring, {1: v1}, 1))
    source = cortex.services.master_keys
    assert source is not None
    with psycopg.connect(dsn) as conn:  # what the replica recorded at its start
        conn.execute("INSERT INTO master_key_checks (key_version, fingerprint) VALUES (2, %s)",
                     (mk.fingerprint(theirs),))
    reloader = RingReloader(source, db=cortex.services.db)

    ring_dir(ring, {1: v1, 2: other}, 2)
    assert await reloader.reload_once() is False
    assert source.ring.current == 1 and source.refusal is not None
    assert "v2 is not the key this cortex was sealed with" in source.refusal.reason
    assert other.hex() not in source.refusal.reason

    ring_dir(ring, {1: v1, 2: theirs, 3: v3}, 3)
    assert await reloader.reload_once() is True and source.ring.current == 3
    with psycopg.connect(dsn) as conn:
        recorded = dict(conn.execute("SELECT key_version, fingerprint FROM master_key_checks"
                                     ).fetchall())
    assert recorded == {1: mk.fingerprint(v1), 2: mk.fingerprint(theirs),
                        3: mk.fingerprint(v3)}
