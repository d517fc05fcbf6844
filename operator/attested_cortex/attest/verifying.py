"""One batch of chain events checked: the hash walk overlapped with their signatures.

Called by :func:`~attested_cortex.attest.auditing.verify_chain` (``cortexctl audit verify``,
``GET /v1/audit/verify``) and by :class:`attested_cortex.bundles.checking.ChainWalk` (the
bundle import), so both report the same first fault for the same events.

Why overlapped: the hash walk is sequential Python (each event links to the one before) and
holds the GIL. The signatures of the whole batch go to the bulk verifier first
(:mod:`.bulkverify`: worker processes for a big batch), and the walk runs in the calling
thread meanwhile. The verdict is the one the sequential order gives: the earliest fault by
position, a signature fault counting only if it comes before the first chain fault.
Signatures past a chain fault are checked and then ignored; that costs only when the batch
is refused anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attested_cortex.attest.bulkverify import BulkVerifier, Triple
from attested_cortex.attest.chain import first_break, signing_key
from attested_cortex.attest.keyring import Keyring
from attested_cortex.store.events import EventRow


@dataclass(frozen=True, slots=True)
class Verdict:
    """How far a batch verified: ``good`` events before the first ``fault`` (None: all);
    ``examined`` events, the good ones and the one a bad signature failed; ``checked`` of
    them carried a signature of a known agent (the one that failed included)."""

    good: int
    fault: str | None
    examined: int
    checked: int


def check_batch(events: Sequence[EventRow], *, expected_sequence: int, expected_prev: bytes,
                keyring: Keyring | None, verifier: BulkVerifier) -> Verdict:
    """Check ``events`` on from ``expected_sequence`` / ``expected_prev``; signatures of the
    agents ``keyring`` knows on ``verifier`` while the chain is walked."""
    known: list[int] = []       # positions of signed events of agents the keyring knows
    triples: list[Triple] = []  # their checks, in order
    owners: list[int] = []      # the position each check belongs to
    faults: list[tuple[int, str]] = []  # known agents naming an untrusted key
    for i, event in enumerate(events):
        if keyring is None or event.signature is None or not keyring.knows(event.agent_id):
            continue
        known.append(i)
        key = signing_key(event, keyring)
        if isinstance(key, bytes):
            triples.append((event.signature, event.payload, key))
            owners.append(i)
        elif key is not None:
            faults.append((i, key))
    pending = verifier.submit(triples)
    good, fault = first_break(events, expected_sequence=expected_sequence,
                              expected_prev=expected_prev)
    bad = pending.result()
    found = faults[:1] + ([] if bad is None else [(owners[bad], "bad_signature")])
    early = min((f for f in found if f[0] < good), default=None)
    examined = good
    if early is not None:
        (good, fault), examined = early, early[0] + 1
    return Verdict(good, fault, examined, sum(1 for i in known if i < examined))
