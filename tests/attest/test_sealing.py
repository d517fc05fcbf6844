"""Sealing at rest (ADR 0056): a sealed value opens only under its domain, row and key
version, with the ring's key; altered bytes and missing versions are refused by name."""

import uuid

import pytest

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.sealing import OVERHEAD, Sealer, UnsealError, associated_data

ROW = uuid.UUID("00000000-0000-4000-8000-000000000001")
OTHER = uuid.UUID("00000000-0000-4000-8000-000000000002")


def ring(current: int = 1) -> mk.KeyRing:
    keys = {v: mk.MasterKey(v, bytes([v]) * 32) for v in (1, 2)}
    return mk.KeyRing(current=current, keys=keys)


def test_a_sealed_value_opens_only_where_it_was_sealed() -> None:
    sealer = Sealer(ring())
    version, sealed = sealer.seal("transcripts", ROW, b"plain frame")
    assert version == 1 and len(sealed) == len(b"plain frame") + OVERHEAD
    assert b"plain frame" not in sealed
    assert sealer.open("transcripts", ROW, 1, sealed) == b"plain frame"
    assert sealer.seal("transcripts", ROW, b"plain frame")[1] != sealed  # a fresh nonce
    for domain, row, ver in (("memory", ROW, 1), ("transcripts", OTHER, 1),
                             ("transcripts", ROW, 2)):
        with pytest.raises(UnsealError, match="altered or moved"):
            sealer.open(domain, row, ver, sealed)  # type: ignore[arg-type]
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(UnsealError):
        sealer.open("transcripts", ROW, 1, flipped)
    with pytest.raises(UnsealError, match="shorter"):
        sealer.open("transcripts", ROW, 1, sealed[:OVERHEAD - 1])


def test_the_current_version_seals_and_every_held_version_opens() -> None:
    old_version, old = Sealer(ring(1)).seal("transcripts", ROW, b"v1 text")
    rotated = Sealer(ring(2))
    new_version, new = rotated.seal("transcripts", ROW, b"v2 text")
    assert (old_version, new_version) == (1, 2)
    assert rotated.open("transcripts", ROW, 1, old) == b"v1 text"
    assert rotated.open("transcripts", ROW, 2, new) == b"v2 text"
    with pytest.raises(UnsealError, match="v3 is not in the master key ring"):
        rotated.open("transcripts", ROW, 3, new)


def test_the_associated_data_layout() -> None:
    """The documented layout (docs/adr/0056): label, domain, row id bytes, version."""
    assert associated_data("transcripts", ROW, 2) == (
        b"attested-cortex-v1-seal\0transcripts\0" + ROW.bytes + b"\0\0\0\2")


def test_blind_tokens_keep_positions_and_operators() -> None:
    """Quoted lexemes (quotes doubled, backslashes escaped) become tokens; the rest stays."""
    from attested_cortex.attest.blinding import key_tsquery, key_tsvector, token

    key = bytes(32)
    it, bs = token(key, "it's"), token(key, "a\\b")
    assert len(it) == 12 and token(bytes([1]) * 32, "it's") != it
    assert key_tsvector("'it''s':1A,4 'a\\\\b':2B", key) == f"'{it}':1A,4 '{bs}':2B"
    assert key_tsquery("'it''s' & !'a\\\\b' <-> 'it''s':*", key) == (
        f"'{it}' & !'{bs}' <-> '{it}':*")


def test_blind_tokens_are_the_documented_hmac_cached_or_not() -> None:
    """A token is HMAC-SHA256(memory subkey, label || lexeme)[:9] as base64url (ADR 0078;
    the legacy form, rows keyed before migration 0027: [:12] as hex, ADR 0056), the same
    from the :class:`Blinder`'s cache as from a fresh one: keying faster (issue 27's batch
    cost) changes no token, so rows keyed before still match."""
    import base64
    import hashlib
    import hmac

    from attested_cortex.attest.blinding import Blinder, blinder, token

    key = bytes(range(32))
    mac = hmac.new(key, b"attested-cortex-v1-fts\0caf\xc3\xa9", hashlib.sha256).digest()
    expected = base64.urlsafe_b64encode(mac[:9]).decode()
    assert token(key, "caf\u00e9") == expected and len(expected) == 12
    legacy = blinder(key, legacy=True)
    assert legacy.token("caf\u00e9") == mac.hex()[:24]
    assert legacy.key_text("'caf\u00e9':1A") == f"'{mac.hex()[:24]}':1A"
    blinder = Blinder(key)
    text = "'caf\u00e9':1A 'x''y':2 'caf\u00e9':3"
    first, quote = blinder.key_text(text), token(key, "x'y")
    assert first == blinder.key_text(text) == Blinder(key).key_text(text) == (
        f"'{expected}':1A '{quote}':2 '{expected}':3")
    assert blinder.key_text("'caf\u00e9':1A,3 & 'é'") == (
        f"'{expected}':1A,3 & '{token(key, 'é')}'")
