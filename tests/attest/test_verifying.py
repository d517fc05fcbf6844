"""check_batch: signatures checked by the bulk verifier while the hashes are walked (in
this thread and on worker processes), with the verdict
the sequential order gives (the earliest fault by position; a bad signature counts only
before the first chain fault). Pure: events built in memory with real Ed25519 keys."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from attested_cortex.attest.bulkverify import BulkVerifier
from attested_cortex.attest.chain import Statement, event_hash
from attested_cortex.attest.keyring import KeyRevision, build_keyring
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.signing import sign
from attested_cortex.attest.verifying import check_batch
from attested_cortex.store.events import GENESIS_HASH, EventRow
from attested_cortex.types import AgentId

AGENT, OTHER = AgentId("k8s:t/agent"), AgentId("k8s:t/unknown")
KEY = generate_key(AGENT)
KEYRING = build_keyring([KeyRevision(AGENT, KEY.public.public_key)])
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(count: int) -> list[EventRow]:
    """``count`` events; every third by an agent the keyring does not know."""
    events, prev = [], GENESIS_HASH
    for seq in range(1, count + 1):
        agent = OTHER if seq % 3 == 0 else AGENT
        payload = f"event {seq}".encode()
        signature = sign(KEY, payload) if agent == AGENT else None
        statement = Statement(agent, "memory.stored", payload, signature,
                              KEY.public.fingerprint if signature else None)
        at = T0 + timedelta(seconds=seq)
        digest = event_hash(sequence=seq, prev_hash=prev, created_at=at, statement=statement)
        events.append(EventRow(sequence=seq, agent_id=agent, event_type="memory.stored",
                               payload=payload, payload_hash=hashlib.sha256(payload).digest(),
                               signature=signature, key_fingerprint=statement.key_fingerprint,
                               prev_hash=prev, hash=digest, created_at=at))
        prev = digest
    return events


def forged(event: EventRow) -> EventRow:
    """The same event, its signature by another key (the hash chain still holds: the hash
    covers the signature, so the event's own hash is recomputed)."""
    signature = sign(generate_key(AGENT), event.payload)
    statement = Statement(event.agent_id, event.event_type, event.payload, signature,
                          event.key_fingerprint)
    return dataclasses.replace(event, signature=signature, hash=event_hash(
        sequence=event.sequence, prev_hash=event.prev_hash, created_at=event.created_at,
        statement=statement))


def check(events: list[EventRow], workers: int) -> tuple[int, str | None, int, int]:
    """``workers`` 1: in this thread; more: that many processes, whatever the batch's size."""
    with BulkVerifier(workers, min_parallel=1) as verifier:
        v = check_batch(events, expected_sequence=1, expected_prev=GENESIS_HASH,
                        keyring=KEYRING, verifier=verifier)
    return v.good, v.fault, v.examined, v.checked


@pytest.mark.parametrize("workers", [1, pytest.param(3, marks=pytest.mark.spawns)])
def test_a_whole_chain_verifies_and_counts_the_known_signatures(workers: int) -> None:
    assert check(chain(30), workers) == (30, None, 30, 20)


@pytest.mark.parametrize("workers", [1, pytest.param(3, marks=pytest.mark.spawns)])
def test_a_bad_signature_before_the_first_chain_fault_is_the_fault(workers: int) -> None:
    events = chain(30)
    events[10] = forged(events[10])  # its hash changed: the next event's link breaks
    assert check(events, workers) == (10, "bad_signature", 11, 8)


@pytest.mark.parametrize("workers", [1, pytest.param(3, marks=pytest.mark.spawns)])
def test_a_bad_signature_after_a_chain_fault_is_not_reported(workers: int) -> None:
    events = chain(30)
    events[22] = forged(events[22])
    del events[5]  # a missing event: the chain breaks at index 5 first
    assert check(events, workers) == (5, "missing_event", 5, 4)


def test_without_a_keyring_only_the_chain_is_checked() -> None:
    events = chain(12)
    events[4] = forged(events[4])
    with BulkVerifier(2) as verifier:
        verdict = check_batch(events, expected_sequence=1, expected_prev=GENESIS_HASH,
                              keyring=None, verifier=verifier)
    assert (verdict.good, verdict.fault, verdict.checked) == (5, "prev_hash_mismatch", 0)
