"""Transcripts encrypted at rest (issue 27 part 3, ADR 0056) on a real server and PostgreSQL.

The same store and replay run with ``encryption.at_rest`` on and off: the replay answers the
text both times; a ``pg_dump`` of the database and a raw scan of its files (the table's
pages and the WAL, after a CHECKPOINT) hold the transcript's text only with encryption off,
so the test fails when sealing stops happening. With it on, the row records its key version
and counts its sealed size against the quota; a server with the key and encryption off
still reads it, one holding another key version only reads it as unreadable (one
without any key does not start).
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import psycopg
import pytest
import zstandard
from hack.support.pgservers import PG15_BIN, PgServer

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.sealing import OVERHEAD
from tests.server.test_key_rotation import ring_dir
from tests.support.cortex import CortexClient, MakeCortex

TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "chat/**"}]}


def marker() -> str:
    """A text zstd keeps as raw literals (under 64 bytes, no repeats): visible unless sealed."""
    return f"secret-{secrets.token_hex(12)}-plaintext"


async def replay_text(client: CortexClient, memory_id: str) -> object:
    reply = await client.call("GET", f"/v1/memories/{memory_id}/replay?full=true")
    assert reply.status == 200, reply.text
    (transcript,) = reply.body["transcripts"]
    return transcript.get("content") if transcript["readable"] else "unreadable"


def at_rest(server: PgServer, dsn: str) -> tuple[str, bytes]:
    """The database's ``pg_dump`` text, and the bytes of its files and of the WAL."""
    dumped = subprocess.run([f"{PG15_BIN}/pg_dump", "--data-only", "-d", dsn], check=True,
                            capture_output=True, timeout=60).stdout.decode()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT oid FROM pg_database "
                           "WHERE datname = current_database()").fetchone()
    assert row is not None
    files = [*Path(server.data_dir, "base", str(row[0])).iterdir(),
             *Path(server.data_dir, "pg_wal").glob("0*")]
    return dumped, b"".join(f.read_bytes() for f in files if f.is_file())


@pytest.mark.parametrize("sealed", [True, False], ids=["on", "off"])
async def test_no_transcript_text_at_rest_with_encryption_on(
        make_cortex: MakeCortex, pg15_server: PgServer, migrated_pg15_dsn: str,
        tmp_path: Path, sealed: bool) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    client = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS,
                               master_key={"file": key}, encryption={"at_rest": sealed})
    text = marker()
    stored = await client.call("POST", "/v1/transcripts",
                               {"namespace": "chat/a", "content": text})
    assert stored.status == 201, stored.text
    memory = await client.store("chat/a", "a summary", citations=[
        {"transcript_id": stored.body["id"], "start": 0, "end": 6}])
    assert await replay_text(client, memory["id"]) == text

    frame = zstandard.ZstdCompressor(level=3, write_content_size=True).compress(text.encode())
    assert stored.body["stored_bytes"] == len(frame) + (OVERHEAD if sealed else 0)
    with psycopg.connect(migrated_pg15_dsn) as conn:
        row = conn.execute("SELECT key_version, octet_length(frame), "
                           "(SELECT transcripts FROM agent_usage WHERE agent = owner) "
                           "FROM transcripts").fetchone()
    assert row == ((1 if sealed else None), stored.body["stored_bytes"],
                   stored.body["stored_bytes"] + 2)  # + the metadata {} as sent

    caps = (await client.call("GET", "/v1/capabilities")).body["encryption"]
    assert caps["at_rest"] is sealed
    assert caps["transcript_frames_by_key_version"] == ({"v1": 1} if sealed else {"plain": 1})
    assert caps["master_key"]["fingerprints"] == {"v1": mk.KeyRing.single(
        key.read_bytes()).key().fingerprint}

    dumped, files = at_rest(pg15_server, migrated_pg15_dsn)
    plain = text.encode()
    assert (text in dumped or plain.hex() in dumped) is not sealed
    assert (plain in files) is not sealed

    if sealed:  # the key without encryption still reads; another key reads nothing
        keyed = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS,
                                  master_key={"file": key})
        assert await replay_text(keyed, memory["id"]) == text
        # (no key at all: start refused, tests/server/test_key_checks.py)
        other = await make_cortex(migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS,
                                  master_key=ring_dir(tmp_path / "other",
                                                      {2: mk.generate_key()}, 2))
        assert await replay_text(other, memory["id"]) == "unreadable"


@pytest.mark.parametrize("sealed", [True, False], ids=["on", "off"])
async def test_a_held_transcript_store_rests_sealed(
        make_cortex: MakeCortex, pg15_server: PgServer, migrated_pg15_dsn: str,
        tmp_path: Path, sealed: bool) -> None:
    """An AskUser rule holds the store: the request waits in pending_actions, sealed (and
    left out of the NOTIFY), while the approver still reads it whole."""
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    (tmp_path / "secret").write_bytes(b"s" * 32)
    held = {"source": "t/held", "namespace": "chat/**", "agents": ["*"],
            "operations": ["transcript"], "decision": "ask_user", "reason": "look first"}
    client = await make_cortex(
        migrated_pg15_dsn, migrated=False, transcripts=TRANSCRIPTS, master_key={"file": key},
        encryption={"at_rest": sealed}, permissions={"mode": "enforce", "rules": [held]},
        approval={"hmac_secret_file": tmp_path / "secret"})
    text = marker()
    reply = await client.call("POST", "/v1/transcripts", {"namespace": "chat/a", "content": text})
    assert reply.status == 202, reply.text
    (listed,) = (await client.call("GET", "/v1/approvals")).body["approvals"]
    assert listed["request"]["content"] == text
    dumped, files = at_rest(pg15_server, migrated_pg15_dsn)
    assert (text in dumped) is not sealed and (text.encode() in files) is not sealed
