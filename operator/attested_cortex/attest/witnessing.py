"""A witness's judgement of a log's new checkpoint against the one it cosigned last: pure.

C2SP ``tlog-witness`` semantics: a witness cosigns a checkpoint only if it extends the
checkpoint it cosigned before (same origin, a size no smaller, and a consistency proof
between the two that verifies); a smaller size or another root for the same size is a
shortened or rewritten history, which it refuses and never forgets (its state stays at
what it cosigned). Called by ``cortexctl audit witness`` (:mod:`attested_cortex.cli.
witnessing`) and ``audit verify --against-checkpoint``'s message.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from attested_cortex.attest import merkle
from attested_cortex.attest.notes import Checkpoint


def _root(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a checkpoint is refused; ``message`` names both sizes and both roots."""

    kind: str  # "truncated", "forked", "rewritten" or "origin"
    message: str


def needs_proof(old: Checkpoint | None, new: Checkpoint) -> bool:
    """Whether judging ``new`` needs a consistency proof from ``old``."""
    return old is not None and 0 < old.size < new.size


def judge(old: Checkpoint | None, new: Checkpoint, proof: Sequence[bytes] = ()
          ) -> Refusal | None:
    """None when ``new`` may be cosigned after ``old``; the refusal otherwise."""
    if old is None or old.size == 0:
        return None
    seen = f"the cosigned checkpoint of size {old.size} (root {_root(old.root)})"
    offered = f"the log's checkpoint of size {new.size} (root {_root(new.root)})"
    if new.origin != old.origin:
        return Refusal("origin", f"{offered} is of origin {new.origin!r}, not {old.origin!r}")
    if new.size < old.size:
        return Refusal("truncated", f"history shortened: {offered} is smaller than {seen}")
    if new.size == old.size:
        if new.root != old.root:
            return Refusal("forked", f"history forked: {offered} differs from {seen}")
        return None
    try:
        merkle.verify_consistency(old.size, new.size, old.root, new.root, proof)
    except merkle.ProofError as exc:
        return Refusal("rewritten", f"history rewritten: {offered} does not extend {seen} "
                       f"({exc})")
    return None


def add_checkpoint_body(old_size: int, proof: Sequence[bytes], note: str) -> bytes:
    """A c2sp.org/tlog-witness ``add-checkpoint`` request: ``old N``, the consistency proof
    (one base64 hash a line), a blank line, the checkpoint note."""
    lines = [f"old {old_size}", *(base64.b64encode(h).decode() for h in proof)]
    return ("\n".join(lines) + "\n\n" + note).encode()


@dataclass(frozen=True, slots=True)
class WitnessReply:
    """What a tlog-witness answer to ``add-checkpoint`` means for the log: ``cosigned``
    (``lines``: its cosignature lines), ``retry`` from the size it knows (``known``), or
    ``refused`` (``message`` says why, with the sizes)."""

    outcome: str
    lines: tuple[str, ...] = ()
    known: int = 0
    message: str = ""


def interpret(status: int, answer: str, *, size: int, sent_old: int) -> WitnessReply:
    """Read a witness's answer to the offer of the checkpoint of ``size`` from ``sent_old``."""
    if status == 200:
        lines = tuple(x for x in answer.splitlines() if x.startswith("\u2014 "))
        return WitnessReply("cosigned", lines)
    if status == 409:
        try:
            known = int(answer.strip())
        except ValueError:
            return WitnessReply("refused", message=f"a 409 without a size: {answer[:200]!r}")
        if known > size:
            return WitnessReply("refused", known=known, message=(
                f"truncated: the witness cosigned size {known}, the log offers size {size}"))
        if known != sent_old:
            return WitnessReply("retry", known=known)
    return WitnessReply("refused", message=(
        f"the witness answered {status} {answer.strip()[:200]!r} to the checkpoint of size "
        f"{size} from its size {sent_old}"))


def against(expected: Checkpoint, events: int, root: bytes | None) -> Refusal | None:
    """Judge a chain of ``events`` whose first ``expected.size`` events have ``root``
    (None when it has fewer) against a checkpoint held elsewhere."""
    held = f"the checkpoint of size {expected.size} (root {_root(expected.root)})"
    if root is None or events < expected.size:
        return Refusal("truncated", f"history shortened: the chain holds {events} events, "
                       f"fewer than {held}")
    if root != expected.root:
        return Refusal("rewritten", f"history rewritten: the chain's first {expected.size} "
                       f"events have root {_root(root)}, not that of {held}")
    return None
