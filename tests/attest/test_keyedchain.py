"""The keyed chain's MAC rule and its walk (attest/keyedchain.py, ADR 0051), on event rows built
here: a MAC recomputed with ``cryptography``'s HMAC (not the module's ``hmac.digest``), events
before the key counted and not faulted, and each fault named at its sequence without
cascading to the events after it."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as chmac

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.keyedchain import KeyedWalk, Seal, seal_from
from attested_cortex.store.events import GENESIS_MAC, EventRow

RING = mk.KeyRing(current=2, keys={1: mk.MasterKey(1, bytes(range(32))),
                                   2: mk.MasterKey(2, bytes(range(32, 64)))})
AT = datetime(2026, 12, 1, tzinfo=UTC)


def reference_mac(key: bytes, prev: bytes, digest: bytes) -> bytes:
    h = chmac.HMAC(key, hashes.SHA256())
    h.update(prev + digest)
    return h.finalize()


def rows(count: int, *, keyed_from: int, version: int = 2,
         odd: dict[int, str] | None = None) -> list[EventRow]:
    """``count`` events appended as servers do: sealed from ``keyed_from`` on with
    ``version``'s subkey, each MAC over the stored MAC before it (zeros when none). ``odd``
    makes some events what others append: ``none`` (no MAC: the role alone), ``garbage``
    (a MAC row forged without the key), ``v7`` (a key version the ring does not hold)."""
    out, prev = [], GENESIS_MAC
    key = RING.subkey("audit", version)
    for sequence in range(1, count + 1):
        digest = hashlib.sha256(b"event %d" % sequence).digest()
        kind = (odd or {}).get(sequence, "sealed" if sequence >= keyed_from else "none")
        mac: bytes | None = {"none": None, "garbage": bytes(32),
                             "v7": reference_mac(bytes(32), prev, digest),
                             "sealed": reference_mac(key, prev, digest)}[kind]
        out.append(EventRow(sequence, "dev:a", "memory.stored", b"", b"", None, None,
                            bytes(32), digest, AT, mac,
                            None if mac is None else (7 if kind == "v7" else version)))
        prev = mac or GENESIS_MAC
    return out


def test_the_seal_is_hmac_sha256_of_the_previous_mac_and_the_hash() -> None:
    seal = seal_from(RING)
    assert seal is not None and seal.version == 2 and "key" not in repr(seal).split("(")[1]
    prev, digest = bytes(32), hashlib.sha256(b"x").digest()
    assert seal(prev, digest) == reference_mac(RING.subkey("audit", 2), prev, digest)
    assert seal_from(None) is None


def test_a_chain_keyed_from_its_middle_verifies_and_counts_the_rest() -> None:
    walk = KeyedWalk.of(RING)
    events = rows(10, keyed_from=4)
    walk.walk(events[:5])  # batches: state carries over
    walk.walk(events[5:])
    report = walk.as_json()
    assert (report["ok"], report["keyed_from"], report["unkeyed_before"],
            report["macs_checked"]) == (True, 4, 3, 7)


def test_each_fault_is_named_once_at_its_sequence() -> None:
    """Appended between sealed events, each is named alone: the next server chained from
    what was stored (the forged MAC, or zeros after an event without one)."""
    events = rows(8, keyed_from=1, odd={3: "none", 5: "garbage", 7: "v7"})
    walk = KeyedWalk.of(RING)
    walk.walk(events)
    assert walk.faults == [(3, "unkeyed_event"), (5, "bad_mac"), (7, "unknown_mac_key")]
    assert walk.distrusted == {3, 5, 7} and walk.checked == 5


def test_a_seal_of_another_version_reads_with_its_own_subkey() -> None:
    walk = KeyedWalk.of(RING)
    walk.walk(rows(3, keyed_from=1, version=1))
    assert walk.fault_count == 0 and walk.checked == 3
    assert Seal(1, RING.subkey("audit", 1)).version == 1
