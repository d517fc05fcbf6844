"""Key values, PEM forms (checked against OpenSSL), and the on-disk identity directory."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from attested_cortex.attest import keyfiles
from attested_cortex.attest.keys import (
    fingerprint_of,
    generate_key,
    private_pem,
    public_from_b64,
    public_from_pem,
    public_pem,
    seed_from_pem,
)
from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.types import AgentId


def test_private_key_repr_hides_the_seed() -> None:
    key = generate_key(AgentId("dev:alice"))
    assert repr(key) == "AgentKey(agent_id='dev:alice')"
    assert seed_from_pem(private_pem(key)).hex() not in repr(key)


def test_pem_round_trip() -> None:
    key = generate_key(AgentId("a"))
    assert seed_from_pem(private_pem(key)) == bytes(key.signing_key)
    raw = key.public.public_key
    assert public_from_pem(public_pem(raw)) == raw
    assert public_from_b64(key.public.public_b64) == raw


@pytest.mark.spawns
def test_openssl_reads_our_private_key_and_derives_our_public_key(tmp_path: Path) -> None:
    key = generate_key(AgentId("a"))
    keyfiles.write_identity(tmp_path / "id", key)
    derived = subprocess.run(
        ["openssl", "pkey", "-in", str(tmp_path / "id" / "private.pem"), "-pubout"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert derived == (tmp_path / "id" / "public.pem").read_text()


def test_fingerprint_is_sha256_hex_of_the_raw_key() -> None:
    assert fingerprint_of(b"\x00" * 32) == (
        "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        "-----BEGIN PRIVATE KEY-----\n@@@\n-----END PRIVATE KEY-----\n",
        # an RSA-sized body behind the right label
        "-----BEGIN PRIVATE KEY-----\n" + "A" * 64 + "\n-----END PRIVATE KEY-----\n",
    ],
)
def test_malformed_private_pem_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        seed_from_pem(text)
    assert info.value.code == "bad_key"


@pytest.mark.parametrize("text", ["not base64!", "AAAA", ""])
def test_malformed_base64_public_key_is_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        public_from_b64(text)


def test_identity_directory_modes_and_round_trip(tmp_path: Path) -> None:
    key = generate_key(AgentId("k8s:team-a/planner"))
    directory = tmp_path / "identity"
    keyfiles.write_identity(directory, key)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "private.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "public.pem").stat().st_mode) == 0o644
    assert (directory / "fingerprint").read_text().strip() == key.public.fingerprint
    assert keyfiles.read_identity(directory).public == key.public
    assert keyfiles.read_public(directory) == key.public


def test_existing_key_is_never_overwritten(tmp_path: Path) -> None:
    keyfiles.write_identity(tmp_path, generate_key(AgentId("a")))
    before = (tmp_path / "private.pem").read_bytes()
    with pytest.raises(ConflictError):
        keyfiles.write_identity(tmp_path, generate_key(AgentId("a")))
    assert (tmp_path / "private.pem").read_bytes() == before


def test_mismatched_files_are_refused(tmp_path: Path) -> None:
    keyfiles.write_identity(tmp_path / "a", generate_key(AgentId("a")))
    keyfiles.write_identity(tmp_path / "b", generate_key(AgentId("b")))
    (tmp_path / "a" / "fingerprint").write_text("0" * 64)
    with pytest.raises(InvalidInputError, match="fingerprint"):
        keyfiles.read_public(tmp_path / "a")
    (tmp_path / "b" / "public.pem").write_text((tmp_path / "a" / "public.pem").read_text())
    (tmp_path / "b" / "fingerprint").unlink()
    with pytest.raises(InvalidInputError, match="does not match"):
        keyfiles.read_identity(tmp_path / "b")


def test_missing_files_and_empty_agent_id(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        keyfiles.read_public(tmp_path)
    keyfiles.write_identity(tmp_path / "x", generate_key(AgentId("x")))
    (tmp_path / "x" / "agent-id").write_text("\n")
    with pytest.raises(InvalidInputError, match="agent-id"):
        keyfiles.read_public(tmp_path / "x")
