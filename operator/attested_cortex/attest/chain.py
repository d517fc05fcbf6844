"""The audit chain's hash rule and the per-event check: pure functions over event rows.

Called by :mod:`~attested_cortex.attest.auditing` (append and verify) and by tests that
rebuild a chain independently.

An event's hash is SHA-256 over the deterministic CBOR (RFC 8949 §4.2.1) of::

    {"v": 1, "agent_id": text, "sequence": uint, "prev_hash": bytes(32),
     "signature": bytes(64), "created_at": uint (Unix microseconds), "event_type": text,
     "payload_hash": bytes(32), "key_fingerprint": text}

(listed in encoded-key order). ``payload_hash`` is SHA-256 of the stored ``payload`` bytes,
``signature`` is the agent's Ed25519 signature over those payload bytes, and ``prev_hash``
is the previous event's hash (32 zero bytes for sequence 1). The sequence number inside the
hash makes a deleted, inserted or reordered row visible at the first sequence it disturbs.
An unsigned event (a write record of an agent without a key, migration 0006) has ``null``
for both ``signature`` and ``key_fingerprint``. Since migration 0006 the database computes
these fields itself on insert (a trigger); this module recomputes them to verify.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from attested_cortex.attest import cbor
from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.signing import verify
from attested_cortex.store.events import EventRow

HASH_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: The hash input's keys in RFC 8949 §4.2.1 order (by encoded bytes: length, then bytewise).
HASH_FIELDS = (
    "v", "agent_id", "sequence", "prev_hash", "signature",
    "created_at", "event_type", "payload_hash", "key_fingerprint",
)
_KEY = {name: cbor.encode(name) for name in HASH_FIELDS}
if sorted(HASH_FIELDS, key=_KEY.__getitem__) != list(HASH_FIELDS):  # pragma: no cover
    raise RuntimeError("HASH_FIELDS must be listed in deterministic CBOR key order")
_MAP_HEAD = cbor.head(5, len(HASH_FIELDS))


@dataclass(frozen=True, slots=True)
class Statement:
    """What a writer asks the chain to record: a signed payload."""

    agent_id: str
    event_type: str
    payload: bytes
    signature: bytes | None
    key_fingerprint: str | None


def unix_us(moment: datetime) -> int:
    """Integer Unix microseconds: exact for PostgreSQL timestamptz values."""
    return (moment - _EPOCH) // _US


def event_hash(
    *, sequence: int, prev_hash: bytes, created_at: datetime, statement: Statement,
    payload_hash: bytes | None = None,
) -> bytes:
    """SHA-256 of the canonical hash input of an event (see the module docstring)."""
    if payload_hash is None:
        payload_hash = hashlib.sha256(statement.payload).digest()
    return hashlib.sha256(
        hash_input(
            sequence=sequence, prev_hash=prev_hash, created_at=created_at,
            statement=statement, payload_hash=payload_hash,
        )
    ).digest()


def hash_input(
    *, sequence: int, prev_hash: bytes, created_at: datetime, statement: Statement,
    payload_hash: bytes,
) -> bytes:
    """The canonical CBOR map an event hash covers.

    The same bytes as ``cbor.encode`` of the documented map (a test holds them equal),
    written out in the pre-sorted key order because verification runs this once per event.
    """
    return b"".join(
        (
            _MAP_HEAD,
            _KEY["v"], cbor.head(0, HASH_VERSION),
            _KEY["agent_id"], cbor.text(statement.agent_id),
            _KEY["sequence"], cbor.head(0, sequence),
            _KEY["prev_hash"], cbor.head(2, len(prev_hash)), prev_hash,
            _KEY["signature"], _bytes_or_null(statement.signature),
            _KEY["created_at"], cbor.head(0, unix_us(created_at)),
            _KEY["event_type"], cbor.text(statement.event_type),
            _KEY["payload_hash"], cbor.head(2, len(payload_hash)), payload_hash,
            _KEY["key_fingerprint"], _NULL if statement.key_fingerprint is None
            else cbor.text(statement.key_fingerprint),
        )
    )


_NULL = b"\xf6"


def _bytes_or_null(value: bytes | None) -> bytes:
    return _NULL if value is None else cbor.head(2, len(value)) + value


def chain_fault(event: EventRow, *, expected_sequence: int, expected_prev: bytes) -> str | None:
    """Why ``event`` breaks the chain at ``expected_sequence``, or None when it fits."""
    if event.sequence != expected_sequence:
        return "missing_event" if event.sequence > expected_sequence else "out_of_order"
    if hashlib.sha256(event.payload).digest() != event.payload_hash:
        return "payload_hash_mismatch"
    if event.prev_hash != expected_prev:
        return "prev_hash_mismatch"
    statement = Statement(
        event.agent_id, event.event_type, event.payload, event.signature, event.key_fingerprint
    )
    recomputed = event_hash(
        sequence=event.sequence, prev_hash=event.prev_hash, created_at=event.created_at,
        statement=statement, payload_hash=event.payload_hash,
    )
    return None if recomputed == event.hash else "hash_mismatch"


def first_break(events: Sequence[EventRow], *, expected_sequence: int,
                expected_prev: bytes) -> tuple[int, str | None]:
    """Walk ``events`` on from the chain's ``expected_sequence`` and ``expected_prev``: the
    index of the first that breaks it with the reason (:func:`chain_fault`), or
    ``(len(events), None)`` when all fit. Shared by the audit and the bundle import."""
    expected, prev = expected_sequence, expected_prev
    for index, event in enumerate(events):
        fault = chain_fault(event, expected_sequence=expected, expected_prev=prev)
        if fault is not None:
            return index, fault
        expected, prev = event.sequence + 1, event.hash
    return len(events), None


def signature_fault(event: EventRow, keyring: Keyring) -> str | None:
    """``bad_signature`` if a trusted key of the event's agent fails it; None otherwise.

    Call it only for agents the keyring knows; the caller counts the others as unverified.
    A known agent whose event names a key not trusted at the event's time is a fault. An
    unsigned event (a write record) claims no signature, so there is nothing to fail.
    """
    key = signing_key(event, keyring)
    if not isinstance(key, bytes):
        return key
    assert event.signature is not None
    return None if verify(key, event.payload, event.signature) else "bad_signature"


def signing_key(event: EventRow, keyring: Keyring) -> bytes | str | None:
    """The trusted public key that must verify the event's signature; None when there is
    nothing to check (unsigned, or an agent the keyring does not know); the fault
    ``unknown_key_for_agent`` when the event names a key not trusted at the event's time.
    Shared by :func:`signature_fault` and the bulk walk (:mod:`.verifying`)."""
    if event.signature is None or event.key_fingerprint is None:
        return None
    at_ms = unix_us(event.created_at) // 1000
    for revision in keyring.keys_at(event.agent_id, at_ms):
        if revision.fingerprint == event.key_fingerprint:
            return revision.public_key
    return "unknown_key_for_agent" if keyring.knows(event.agent_id) else None

