"""The server's master key ring (ADR 0050): a real ``cortexctl serve`` with a key file logs
the versions and fingerprint, never the key or a subkey; a bad key stops start-up before the
database is touched, naming the setting and not the content; the passphrase option derives
the documented key; without a key the server runs with none."""

from __future__ import annotations

import argparse
import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from hack.support.pgservers import PgServer
from hack.support.served import serve

from attested_cortex.attest import masterkeys as mk
from attested_cortex.cli import serve as serve_cli
from attested_cortex.errors import CortexError, InvalidInputError
from attested_cortex.server.assembling import open_services
from attested_cortex.server.configuring import key_ring_from
from attested_cortex.server.settings import load_settings
from tests.support.cortex import MakeCortex

DOCS = Path(__file__).resolve().parents[2] / "docs" / "keys.md"


def test_serve_with_a_key_file_logs_no_key_material(
        pg15_server: PgServer, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    key = mk.generate_key()
    key_file = tmp_path / "master.key"
    key_file.write_bytes(key)
    config = tmp_path / "config.yaml"
    config.write_text("log_level: DEBUG\n", encoding="utf-8")
    with serve(migrated_pg15_dsn, tmp_path, "--master-key-file", str(key_file),
               "--config", str(config), "--graph-backend", "CTE") as served:
        log = served.log.read_text()
    ring = mk.KeyRing.single(key)
    loaded = [json.loads(line) for line in log.splitlines() if "master key ring" in line]
    assert len(loaded) == 1 and ring.key().fingerprint in loaded[0]["msg"]
    for material in (key, *(ring.subkey(d) for d in mk.DOMAINS)):
        assert material.hex() not in log and repr(material)[2:-1] not in log


async def test_a_bad_key_file_stops_start_up(tmp_path: Path) -> None:
    """The database URL points nowhere: the key is refused before any connection."""
    bad = tmp_path / "bad"
    bad.write_text("0123456789abcdef" * 3)  # 48 hex characters
    settings = load_settings(None, {"database_url": "postgresql://127.0.0.1:1/x",
                                    "master_key": {"file": bad}})
    async with AsyncExitStack() as stack:
        with pytest.raises(InvalidInputError, match="32 raw bytes or 64 hex") as refused:
            await open_services(settings, stack)
    assert "0123456789abcdef" not in str(refused.value)


def flags(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"master_key_file": None, "master_key_passphrase_file": None,
                                 "master_key_salt": None, **given})


def test_the_other_refusals_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(CortexError, match="go together"):
        serve_cli._master_key(flags(master_key_passphrase_file=tmp_path))
    with pytest.raises(CortexError, match="exclude each other"):
        serve_cli._master_key(flags(master_key_file=tmp_path, master_key_passphrase_file=tmp_path,
                                    master_key_salt="00" * 16))
    with pytest.raises(InvalidInputError, match=r"master_key\.salt"):
        load_settings(None, {"master_key": serve_cli._master_key(flags(
            master_key_passphrase_file=tmp_path, master_key_salt="00"))})
    with pytest.raises(InvalidInputError, match=r"cannot read master_key\.file"):
        key_ring_from(load_settings(None, {"master_key": {"file": tmp_path / "missing"}}))
    with pytest.raises(InvalidInputError, match="exactly one of"):
        load_settings(None, {"master_key": {"file": tmp_path, "dir": tmp_path}})


async def test_the_passphrase_option_and_no_key(make_cortex: MakeCortex,
                                                migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """The documented Argon2id vector (seed parameters) is the key ring the services hold."""
    text = DOCS.read_text(encoding="utf-8")
    vector = dict(line.split(": ", 1) for line in text.split("```keys-argon2id-vector\n")[1]
                  .split("```")[0].strip().splitlines())
    phrase = tmp_path / "passphrase"
    phrase.write_text(vector["passphrase"] + "\n")
    # without a key first: once a key sealed the cortex, a keyless start is refused
    plain = await make_cortex(migrated_pg15_dsn)
    assert plain.services.key_ring is None
    keyed = await make_cortex(migrated_pg15_dsn, master_key={
        "passphrase_file": phrase, "salt": vector["salt"]})
    ring = keyed.services.key_ring
    assert ring is not None and ring.key().material == bytes.fromhex(vector["master"])
    assert (await keyed.call("GET", "/readyz")).status == 200
