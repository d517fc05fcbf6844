"""The key hierarchy (ADR 0050): the documented vectors (docs/keys.md), HKDF checked against
RFC 5869 computed with the standard library, Argon2id against RFC 9106's vector and against
libsodium (PyNaCl), and the loaders' refusals, which never quote key material."""

from __future__ import annotations

import hashlib
import hmac
import re
from pathlib import Path

import nacl.pwhash.argon2id
import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from attested_cortex.attest import masterkeys as mk
from attested_cortex.errors import InvalidInputError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "keys.md"


def vector(name: str) -> dict[str, str]:
    """The ``name`` fenced block of docs/keys.md as a mapping."""
    block = re.search(rf"```{name}\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert block is not None, f"docs/keys.md has no {name} block"
    return dict(line.split(": ", 1) for line in block.group(1).strip().splitlines())


def rfc5869(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 for one 32-byte block, as RFC 5869 writes it (an independent check)."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def test_the_documented_hkdf_vector() -> None:
    v = vector("keys-hkdf-vector")
    master = bytes.fromhex(v.pop("master"))
    assert sorted(v) == sorted(mk.DOMAINS)
    ring = mk.KeyRing.single(master)
    for domain in mk.DOMAINS:
        expected = bytes.fromhex(v[domain])
        assert mk.derive_subkey(master, domain) == expected == ring.subkey(domain)
        assert rfc5869(master, b"attested-cortex-v1-storage", domain.encode()) == expected
    assert len({ring.subkey(d) for d in mk.DOMAINS}) == len(mk.DOMAINS)


def test_the_documented_argon2id_vector() -> None:
    """Seed 003's parameters (64 MiB, t=3, p=4): about half a second."""
    v = vector("keys-argon2id-vector")
    derived = mk.key_from_passphrase(v["passphrase"].encode(), bytes.fromhex(v["salt"]))
    assert derived == bytes.fromhex(v["master"])


def test_argon2id_is_rfc_9106_and_agrees_with_libsodium() -> None:
    rfc = Argon2id(salt=b"\x02" * 16, length=32, iterations=3, lanes=4, memory_cost=32,
                   ad=b"\x04" * 12, secret=b"\x03" * 8).derive(b"\x01" * 32)
    assert rfc.hex() == "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659"
    small = mk.Argon2Params(iterations=2, memory_kib=8 * 1024, lanes=1)  # libsodium: p = 1
    ours = mk.key_from_passphrase(b"pass phrase", b"s" * 16, small)
    assert ours == nacl.pwhash.argon2id.kdf(32, b"pass phrase", b"s" * 16, opslimit=2,
                                            memlimit=8 * 1024 * 1024)
    with pytest.raises(InvalidInputError, match="16 bytes"):
        mk.key_from_passphrase(b"pass phrase", b"short", small)


def test_a_ring_dir_with_two_versions(tmp_path: Path) -> None:
    old, new = mk.generate_key(), mk.generate_key()
    for name, text in mk.ring_files({1: old, 2: new}, current=2).items():
        (tmp_path / name).write_text(text + "\n")
    (tmp_path / "..data").mkdir()  # the kubelet's own entries are not versions
    ring = mk.load_ring_dir(tmp_path)
    assert (ring.current, ring.versions) == (2, [1, 2])
    assert ring.subkey("memory") == mk.derive_subkey(new, "memory")
    assert ring.subkey("memory", version=1) == mk.derive_subkey(old, "memory")
    with pytest.raises(InvalidInputError, match="v3 is not in the key ring"):
        ring.key(3)


def test_key_files_raw_or_hex(tmp_path: Path) -> None:
    key = mk.generate_key()
    (tmp_path / "raw").write_bytes(key)
    (tmp_path / "hex").write_text(key.hex() + "\n")
    assert mk.load_key_file(tmp_path / "raw").key().material == key
    assert mk.load_key_file(tmp_path / "hex").key().material == key


def test_refusals_never_quote_material(tmp_path: Path) -> None:
    secret_text = "ab" * 31  # 62 hex characters: one byte short
    (tmp_path / "short").write_text(secret_text)
    with pytest.raises(InvalidInputError) as short:
        mk.load_key_file(tmp_path / "short")
    (tmp_path / "v1").write_text(mk.generate_key().hex())
    (tmp_path / "current").write_text("v2")
    with pytest.raises(InvalidInputError) as dangling:
        mk.load_ring_dir(tmp_path)
    (tmp_path / "current").write_text("latest")
    with pytest.raises(InvalidInputError, match="must name a version"):
        mk.load_ring_dir(tmp_path)
    with pytest.raises(InvalidInputError, match="cannot read"):
        mk.load_key_file(tmp_path / "absent")
    assert secret_text not in str(short.value) and "v2 is not in" in str(dangling.value)


def test_repr_and_describe_show_no_material() -> None:
    key = mk.generate_key()
    ring = mk.KeyRing.single(key)
    shown = f"{ring!r} {ring.key()!r} {ring.describe()}"
    for domain in mk.DOMAINS:
        assert ring.subkey(domain).hex() not in shown
    assert key.hex() not in shown and repr(key) not in shown
    assert ring.key().fingerprint in shown
