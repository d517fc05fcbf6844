"""The HMAC-keyed audit chain (issue 27 part 4, seed 003 Deliverable 1, ADR 0051).

Every event a server holding the master key appends gets a MAC row (migration 0014)::

    mac_n = HMAC-SHA256(audit subkey of the key version, mac_{n-1} || hash_n)

``mac_{n-1}`` is the MAC row of event ``n-1``, or 32 zero bytes when that event has none.
The hash chain alone says the rows were not changed *after* they were appended; anyone
holding the database role can still append a well-hashed event (a forged write record that
matches a row they changed). The MAC says the event was appended by a holder of the key.

:class:`Seal` computes MACs for the store (:func:`attested_cortex.store.events.bind_seal`);
:class:`KeyedWalk` checks them, event by event, in the same pass as the hash walk
(:func:`attested_cortex.attest.auditing.verify_chain`). From the first event that has a MAC
(``keyed_from``: the first append after the cortex got its key) every event must have a
valid one: ``unkeyed_event`` (no MAC: appended by someone without the key, such as the
database role alone), ``bad_mac`` (a MAC the key does not give), ``unknown_mac_key`` (a
key version the ring no longer holds). Events before ``keyed_from`` (chains older than the
key, an imported bundle's events) are counted as ``unkeyed_before``, not faults: nothing
could have sealed them. ``hmac`` of the standard library only; no cryptography of our own.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from attested_cortex.attest.masterkeys import KeyRing
from attested_cortex.attest.ringwatch import RingSource
from attested_cortex.store.events import GENESIS_MAC, EventRow

KeyedProblem = Literal["unkeyed_event", "bad_mac", "unknown_mac_key"]
#: Faults listed in a report; the count always covers all of them.
MAX_LISTED: Final = 1000
#: What a verification without the key says about the keyed chain.
NO_KEY: Final = ("no master key: the HMAC-keyed chain was not checked (the server runs "
                 "without one, or pass --master-key-file / --master-key-dir)")


@dataclass(frozen=True)
class Seal:
    """The MAC of the keyed chain under one master key version's ``audit`` subkey."""

    version: int
    key: bytes = field(repr=False)

    def __call__(self, prev_mac: bytes, event_hash: bytes) -> bytes:
        return hmac.digest(self.key, prev_mac + event_hash, "sha256")

    def verifies(self, prev_mac: bytes, event_hash: bytes, mac: bytes, version: int) -> bool:
        return version == self.version and hmac.compare_digest(self(prev_mac, event_hash), mac)


class LiveSeal:
    """The seal of whatever ring is in use now (:class:`.ringwatch.RingSource`): a reloaded
    ring's current version seals the next append. The store reads :attr:`version` and calls
    the seal without awaiting in between (``store.events.seal_appended``), and a ring is only
    swapped on the event loop, so one batch of MACs is made and labelled with one version."""

    def __init__(self, source: RingSource) -> None:
        self.source = source

    @property
    def version(self) -> int:
        return self.source.ring.current

    def __call__(self, prev_mac: bytes, event_hash: bytes) -> bytes:
        return hmac.digest(self.source.ring.subkey("audit"), prev_mac + event_hash, "sha256")

    def verifies(self, prev_mac: bytes, event_hash: bytes, mac: bytes, version: int) -> bool:
        """Under any version the ring holds (a record sealed before a rotation counts)."""
        ring = self.source.ring
        if version not in ring.keys:
            return False
        expected = hmac.digest(ring.subkey("audit", version), prev_mac + event_hash, "sha256")
        return hmac.compare_digest(expected, mac)


def seal_from(ring: KeyRing | None) -> Seal | None:
    """The seal of the ring's current version (None without a master key: unsealed
    appends, as before migration 0014)."""
    if ring is None:
        return None
    return Seal(ring.current, ring.subkey("audit"))


@dataclass
class KeyedWalk:
    """Running state of the keyed check over events in sequence order."""

    keys: dict[int, bytes]
    keyed_from: int | None = None
    unkeyed_before: int = 0
    checked: int = 0
    fault_count: int = 0
    faults: list[tuple[int, KeyedProblem]] = field(default_factory=list)
    #: Every faulty sequence (the deep audit trusts no record among them).
    distrusted: set[int] = field(default_factory=set)
    _prev: bytes = GENESIS_MAC

    @classmethod
    def of(cls, ring: KeyRing) -> KeyedWalk:
        return cls({v: ring.subkey("audit", v) for v in ring.versions})

    def walk(self, events: Sequence[EventRow]) -> None:
        """Check ``events`` (the next ones of the chain, already hash-checked)."""
        digest, keys, prev = hmac.digest, self.keys, self._prev
        for event in events:
            mac = event.mac
            if mac is None:
                if self.keyed_from is None:
                    self.unkeyed_before += 1
                else:
                    self._fault(event.sequence, "unkeyed_event")
                prev = GENESIS_MAC
                continue
            if self.keyed_from is None:
                self.keyed_from = event.sequence
            key = keys.get(event.mac_version or 0)
            if key is None:
                self._fault(event.sequence, "unknown_mac_key")
            # MACs are public (stored beside the events): no constant-time compare needed.
            elif digest(key, prev + event.hash, "sha256") == mac:
                self.checked += 1
            else:
                self._fault(event.sequence, "bad_mac")
            prev = mac  # the next writer chained from the stored MAC, good or not
        self._prev = prev

    def _fault(self, sequence: int, problem: KeyedProblem) -> None:
        self.fault_count += 1
        self.distrusted.add(sequence)
        if len(self.faults) < MAX_LISTED:
            self.faults.append((sequence, problem))

    def as_json(self) -> dict[str, Any]:
        return {"checked": True, "ok": self.fault_count == 0,
                "key_versions": sorted(self.keys), "keyed_from": self.keyed_from,
                "unkeyed_before": self.unkeyed_before, "macs_checked": self.checked,
                "fault_count": self.fault_count,
                "faults": [{"sequence": s, "problem": p} for s, p in self.faults],
                "truncated": self.fault_count > len(self.faults)}


def unchecked() -> dict[str, Any]:
    """The keyed part of a report made without the key."""
    return {"checked": False, "ok": None, "reason": NO_KEY}
