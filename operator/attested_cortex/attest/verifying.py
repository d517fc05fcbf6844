"""One batch of chain events checked: the hash walk overlapped with their signatures.

Called by :func:`~attested_cortex.attest.auditing.verify_chain` (``cortexctl audit verify``,
``GET /v1/audit/verify``) and by :class:`attested_cortex.bundles.checking.ChainWalk` (the
bundle import), so both report the same first fault for the same events.

Why overlapped: the hash walk is sequential Python (each event links to the one before) and
holds the GIL; an Ed25519 verify is libsodium C code that releases it. Checking the chain
first and the signatures after left one core idle during the walk (17,451 events/s with
signatures against 66,891/s for hashes alone, issue 24). Here the signatures of the whole
batch go to the pool first, in contiguous slices (a future per event would cost more than a
verify), and the walk runs in the calling thread meanwhile. The verdict is the one the
sequential order gives: the earliest fault by position, a signature fault counting only if
it comes before the first chain fault. Signatures past a chain fault are checked and then
ignored; that costs only when the batch is refused anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from attested_cortex.attest.chain import first_break, signature_fault
from attested_cortex.attest.keyring import Keyring
from attested_cortex.store.events import EventRow

Signed = list[tuple[int, EventRow]]


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
                keyring: Keyring | None, pool: Executor, workers: int) -> Verdict:
    """Check ``events`` on from ``expected_sequence`` / ``expected_prev``; signatures of the
    agents ``keyring`` knows on ``pool`` (``workers`` slices) while the chain is walked."""
    known: Signed = [] if keyring is None else [
        (i, e) for i, e in enumerate(events)
        if e.signature is not None and keyring.knows(e.agent_id)]
    size = max(1, -(-len(known) // max(1, workers)))
    futures: list[Future[tuple[int, str] | None]] = [
        pool.submit(_first_bad, known[start:start + size], keyring)
        for start in range(0, len(known), size)] if keyring is not None else []
    good, fault = first_break(events, expected_sequence=expected_sequence,
                              expected_prev=expected_prev)
    found = [f for f in (future.result() for future in futures) if f is not None]
    early = min((f for f in found if f[0] < good), default=None)
    examined = good
    if early is not None:
        (good, fault), examined = early, early[0] + 1
    return Verdict(good, fault, examined, sum(1 for i, _ in known if i < examined))


def _first_bad(signed: Signed, keyring: Keyring) -> tuple[int, str] | None:
    for index, event in signed:
        fault = signature_fault(event, keyring)
        if fault is not None:
            return index, fault
    return None
