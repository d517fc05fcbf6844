"""``cortexctl audit witness`` and ``audit verify --against-checkpoint`` (issue 40, ADR 0100)
against a real server and what someone with the database role alone can do to it: delete
the newest events with the head, restore an old dump, fork the chain. Each is named, with
both sizes and both roots, by the witness and by the verify against the witness's state."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
from hack.support.pgservers import PG15_BIN, PgServer
from psycopg import sql

from attested_cortex.attest import notes
from attested_cortex.cli.main import main
from tests.server.test_audit_checkpoints import SIGNER, audited
from tests.support.cortex import CortexClient, MakeCortex


async def witness(cortex: CortexClient, state: Path, capsys: pytest.CaptureFixture[str]
                  ) -> tuple[int, str]:
    code = await asyncio.to_thread(main, [
        "audit", "witness", "--server", cortex.base, "--state", str(state),
        "--agent-id", "dev:witness", "--name", "witness.test/w1"])
    out = capsys.readouterr()
    return code, out.out + out.err


async def verify_against(dsn: str, held: Path, capsys: pytest.CaptureFixture[str]
                         ) -> tuple[int, str]:
    code = await asyncio.to_thread(main, [
        "audit", "verify", "--database-url", dsn, "--against-checkpoint", str(held)])
    out = capsys.readouterr()
    return code, out.out + out.err


async def grow(cortex: CortexClient, n: int, tag: str) -> None:
    """Store ``n`` memories, then cut the checkpoint the cadence would."""
    for i in range(n):
        await cortex.store("kb", f"{tag} {i}")
    assert cortex.services.checkpointer is not None
    await cortex.services.checkpointer.cut_now()


#: Every table of the chain and its tree, whose triggers refuse a deletion.
CHAIN_TABLES = ["signed_events", "signed_event_macs", "audit_cosignatures",
                "audit_checkpoints", "audit_tree_nodes"]


def cut_back(dsn: str, keep: int) -> None:
    """As the database's owner: delete every event past ``keep`` with its MAC, and the
    checkpoints and tree nodes over them (the head with the tail). Also the real-node
    witness test's cut (tests/realnode/test_witness.py), where the MACs' and cosignatures'
    own triggers refuse the deletion too."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        triggers = conn.execute(
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND c.relname = ANY(%s)", (CHAIN_TABLES,)).fetchall()
        for table, trigger in triggers:
            conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(
                sql.Identifier(table), sql.Identifier(trigger)))
        conn.execute("DELETE FROM signed_event_macs WHERE sequence > %s", (keep,))
        conn.execute("DELETE FROM signed_events WHERE sequence > %s", (keep,))
        conn.execute("DELETE FROM audit_cosignatures WHERE tree_size > %s", (keep,))
        conn.execute("DELETE FROM audit_checkpoints WHERE tree_size > %s", (keep,))
        conn.execute("DELETE FROM audit_tree_nodes WHERE (idx + 1) * (1::bigint << level) > %s",
                     (keep,))
        for table, trigger in triggers:
            conn.execute(sql.SQL("ALTER TABLE {} ENABLE ALWAYS TRIGGER {}").format(
                sql.Identifier(table), sql.Identifier(trigger)))


async def pg_dump(dsn: str, dump: Path) -> None:
    await asyncio.to_thread(subprocess.run, [f"{PG15_BIN}/pg_dump", "-Fc", "-d", dsn, "-f",
                                             str(dump)], check=True, capture_output=True,
                            timeout=60)


async def restored(server: PgServer, dump: Path) -> str:
    """A new database of ``server`` restored from ``dump``: its DSN."""
    name = f"cortex_restored_{uuid.uuid4().hex[:8]}"
    server.create_database(name)
    await asyncio.to_thread(subprocess.run, [f"{PG15_BIN}/pg_restore", "-d", server.dsn(name),
                                             str(dump)], check=True, capture_output=True,
                            timeout=60)
    return server.dsn(name)


async def test_a_witness_cosigns_and_names_a_truncation(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    state = tmp_path / "witness"
    await grow(cortex, 5, "first")
    code, said = await witness(cortex, state, capsys)
    assert code == 0 and "cosigned: size 5" in said, said
    await grow(cortex, 20, "second")
    code, said = await witness(cortex, state, capsys)
    assert code == 0 and "cosigned: size 25" in said, said
    held = (state / "checkpoint").read_text()
    log = notes.Verifier.parse((state / "log.vkey").read_text())
    assert log.name == f"attested-cortex/{SIGNER}"
    cosigned = notes.open_checkpoint(held, log)
    assert notes.verify_cosignature(held, notes.Verifier(
        "witness.test/w1", notes.COSIGNATURE_V1, _witness_public(state))) > 0

    code, said = await verify_against(cortex.dsn, state / "checkpoint", capsys)
    assert code == 0, said

    cut_back(cortex.dsn, 15)  # the newest 10 events, and the head with them
    chain = await cortex.call("GET", "/v1/audit/verify")  # alone, the shorter chain holds
    assert chain.body["ok"] is True and chain.body["events"] == 15, chain.body
    await grow(cortex, 0, "")  # the next cut: of the 15 events left
    code, said = await witness(cortex, state, capsys)
    assert code == 1 and "refused (truncated)" in said, said
    assert "size 25" in said and "size 15" in said
    assert notes.open_checkpoint((state / "checkpoint").read_text(), log) == cosigned
    code, said = await verify_against(cortex.dsn, state / "checkpoint", capsys)
    assert code == 1 and "the chain holds 15 events, fewer than the checkpoint of size 25" \
        in said, said


async def test_an_old_dump_and_a_fork_are_refused(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, pg15_server: PgServer,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    state = tmp_path / "witness"
    await grow(cortex, 6, "before")
    assert (await witness(cortex, state, capsys))[0] == 0
    dump = tmp_path / "old.dump"
    await pg_dump(cortex.dsn, dump)
    await grow(cortex, 10, "after")
    code, said = await witness(cortex, state, capsys)
    assert code == 0 and "cosigned: size 16" in said, said

    # The database replaced by the old dump: a server on it, the same audit signer.
    old = await audited(make_cortex, await restored(pg15_server, dump), tmp_path)
    code, said = await witness(old, state, capsys)
    assert code == 1 and "refused (truncated)" in said and "size 6" in said, said
    await grow(old, 15, "diverged")  # past the cosigned size, on another history
    code, said = await witness(old, state, capsys)
    assert code == 1 and "refused (rewritten)" in said and "size 16" in said, said
    code, said = await verify_against(old.dsn, state / "checkpoint", capsys)
    assert code == 1 and "history rewritten: the chain's first 16 events" in said, said

    # A fork: the same size, two different events at its sequences.
    cut_back(cortex.dsn, 12)
    await grow(cortex, 4, "forked")
    code, said = await witness(cortex, state, capsys)
    assert code == 1 and "refused (forked)" in said and said.count("size 16") == 2, said


def _witness_public(state: Path) -> bytes:
    import json

    from nacl.signing import SigningKey

    seed = json.loads((state / "witness.key").read_text())["seed"]
    return bytes(SigningKey(bytes.fromhex(seed)).verify_key)
