"""Append signed statements to the audit chain and verify the whole chain.

The async edge over :mod:`~attested_cortex.attest.chain` (pure hashing) and
:mod:`attested_cortex.store.events` (SQL). Called by the service layer after every signed
write, inside the write's transaction, by ``GET /v1/audit/verify`` and by
``cortexctl audit verify``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from attested_cortex.attest import cbor, merkle
from attested_cortex.attest.bulkverify import BulkVerifier
from attested_cortex.attest.chain import Statement
from attested_cortex.attest.keyedchain import KeyedWalk, unchecked
from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.masterkeys import KeyRing
from attested_cortex.attest.signing import SIGNATURE_BYTES, sign
from attested_cortex.attest.verifying import check_batch
from attested_cortex.errors import InvalidInputError
from attested_cortex.store import events
from attested_cortex.store.database import Conn
from attested_cortex.store.events import GENESIS_HASH, EventRow


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The outcome of a full verification (``GET /v1/audit/verify`` returns its JSON)."""

    ok: bool
    events: int
    first_bad_sequence: int | None = None
    reason: str | None = None
    head_hash: str | None = None
    signatures_checked: int = 0
    unverified: int = 0
    #: The HMAC-keyed chain (:mod:`.keyedchain`): checked with the master key, else says why not.
    keyed: dict[str, Any] = field(default_factory=unchecked)
    #: Checkpoints whose root the events were found to have (ADR 0099); a chain shorter than
    #: one is ``truncated``, another root at its size ``checkpoint_mismatch``.
    checkpoints_checked: int = 0


async def append_event(
    conn: Conn,
    *,
    agent_id: str,
    event_type: str,
    payload: bytes | cbor.CborValue,
    signer: AgentKey | None = None,
    signature: bytes | None = None,
    key_fingerprint: str | None = None,
) -> EventRow:
    """Record a signed statement as the next event, inside the caller's transaction.

    Either ``signer`` (Cortex custody: the event is signed here) or an already verified
    ``signature`` with the ``key_fingerprint`` that verified it (Agent custody). Payloads that
    are not bytes are encoded with deterministic CBOR first. The database places and hashes
    the event and holds the chain lock until the caller's transaction ends, so call it last.
    A repeated statement raises ConflictError (code ``replay``).
    """
    body = payload if isinstance(payload, bytes) else cbor.encode(payload)
    statement = _statement(
        agent_id=agent_id, event_type=event_type, payload=body,
        signer=signer, signature=signature, key_fingerprint=key_fingerprint,
    )
    return await _append(conn, statement)


async def record_event(
    conn: Conn, *, agent_id: str, event_type: str,
    payload: cbor.CborValue, signer: AgentKey | None = None,
) -> EventRow:
    """Record a write (docs/attestation.md, "Write records"): signed by ``signer`` when the
    cortex holds the acting agent's key, unsigned otherwise. Call it last in the write's
    transaction (or in the same statement's transaction), like :func:`append_event`."""
    body = cbor.encode(payload)
    if signer is not None:
        return await append_event(conn, agent_id=agent_id, event_type=event_type, payload=body,
                                  signer=signer)
    return await _append(conn, Statement(agent_id, event_type, body, None, None))


async def _append(conn: Conn, statement: Statement) -> EventRow:
    return await events.append(
        conn, agent_id=statement.agent_id, event_type=statement.event_type,
        payload=statement.payload, signature=statement.signature,
        key_fingerprint=statement.key_fingerprint,
    )


async def verify_chain(
    conn: Conn, *, keyring: Keyring | None = None, master: KeyRing | None = None,
    distrusted: set[int] | None = None, batch: int = 5000,
    checkpoints: Mapping[int, bytes] | None = None, roots: dict[int, bytes] | None = None,
) -> ChainReport:
    """Walk the chain in sequence order; report the first event that breaks it.

    Without a keyring only the hash chain is checked; with one, every event whose agent the
    keyring knows must carry a valid signature by a key trusted at the event's time. With
    the ``master`` key ring the keyed chain is checked too (:mod:`.keyedchain`): every keyed
    fault is listed, and the first one is the report's fault when the hash chain holds;
    ``distrusted`` (when given) receives every keyed fault's sequence, for the deep audit.
    ``checkpoints`` (tree size -> root, ADR 0099): the events must have each root at its
    size, recomputed here from the events alone (the tree kept in the database is not read);
    ``roots`` (when given) receives the root the events have at each of those sizes.
    """
    state = _Walk(keyring, None if master is None else KeyedWalk.of(master), checkpoints)
    with BulkVerifier() as verifier:
        # aclosing: stopping at the first fault must still close the cursor and transaction.
        async with aclosing(events.stream_events(
                conn, batch=batch, with_macs=master is not None)) as stream:
            async for rows in stream:
                # Hashing and Ed25519 run off the event loop; the batch's signatures are
                # checked by the verifier's processes while its hashes are walked.
                fault = await asyncio.to_thread(state.walk, rows, verifier)
                if fault is not None:
                    break
            else:
                fault = None
    if distrusted is not None:
        distrusted |= state.distrusted
    if roots is not None:
        roots.update(state.tree_roots)
    return state.report(fault)


class _Walk:
    """Running state of one verification pass, advanced one batch of events at a time."""

    def __init__(self, keyring: Keyring | None, keyed: KeyedWalk | None,
                 checkpoints: Mapping[int, bytes] | None = None) -> None:
        self.keyring = keyring
        self.keyed = keyed
        self.checkpoints = dict(checkpoints or {})
        self.tree = merkle.Frontier() if self.checkpoints else None
        self.tree_checked = 0
        self.tree_roots: dict[int, bytes] = {}
        self.tree_fault: tuple[int, str] | None = None
        self.expected = 1
        self.prev = GENESIS_HASH
        self.checked = 0
        self.unverified = 0

    def walk(self, rows: list[EventRow], verifier: BulkVerifier) -> str | None:
        """Check a batch; advance past every good event; return the first fault, if any."""
        verdict = check_batch(rows, expected_sequence=self.expected, expected_prev=self.prev,
                              keyring=self.keyring, verifier=verifier)
        if self.keyring is not None:
            self.checked += verdict.checked
            self.unverified += verdict.examined - verdict.checked
        if self.keyed is not None:
            self.keyed.walk(rows[:verdict.good])
        if self.tree is not None:
            self._grow(rows[:verdict.good])
        if verdict.good:
            last = rows[verdict.good - 1]
            self.expected, self.prev = last.sequence + 1, last.hash
        return verdict.fault

    def _grow(self, rows: list[EventRow]) -> None:
        assert self.tree is not None
        for row in rows:
            self.tree.append(merkle.leaf_hash(row.hash))
            expected = self.checkpoints.get(self.tree.size)
            if expected is None:
                continue
            self.tree_checked += 1
            self.tree_roots[self.tree.size] = self.tree.root()
            if self.tree_fault is None and self.tree_roots[self.tree.size] != expected:
                self.tree_fault = (self.tree.size, "checkpoint_mismatch")

    def report(self, fault: str | None) -> ChainReport:
        count = self.expected - 1
        first_bad = None if fault is None else self.expected
        keyed = unchecked() if self.keyed is None else self.keyed.as_json()
        if fault is None and self.tree_fault is not None:
            first_bad, fault = self.tree_fault
        if fault is None and self.checkpoints and max(self.checkpoints) > count:
            first_bad, fault = count + 1, "truncated"
        if fault is None and self.keyed is not None and self.keyed.faults:
            first_bad, fault = self.keyed.faults[0]
        return ChainReport(
            ok=fault is None,
            events=count,
            first_bad_sequence=first_bad,
            reason=fault,
            head_hash=self.prev.hex() if count else None,
            signatures_checked=self.checked,
            unverified=self.unverified,
            keyed=keyed,
            checkpoints_checked=self.tree_checked,
        )

    @property
    def distrusted(self) -> frozenset[int]:
        """Events the keyed walk found appended without the key (the deep audit trusts
        no record among them)."""
        return frozenset() if self.keyed is None else frozenset(self.keyed.distrusted)


def _statement(
    *, agent_id: str, event_type: str, payload: bytes,
    signer: AgentKey | None, signature: bytes | None, key_fingerprint: str | None,
) -> Statement:
    if signer is not None:
        if signature is not None or signer.agent_id != agent_id:
            raise InvalidInputError("pass either a signer for agent_id or a signature, not both")
        public = signer.public
        return Statement(agent_id, event_type, payload, sign(signer, payload), public.fingerprint)
    if signature is None or key_fingerprint is None or len(signature) != SIGNATURE_BYTES:
        raise InvalidInputError("an audit event needs a signer or a 64-byte signature and its key")
    return Statement(agent_id, event_type, payload, signature, key_fingerprint)
