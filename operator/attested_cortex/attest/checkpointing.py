"""Cut signed checkpoints of the audit tree and answer inclusion and consistency proofs.

The async edge over :mod:`.merkle` and :mod:`.notes` (pure) and
:mod:`attested_cortex.store.checkpoints` (SQL). Called by the server's checkpointer
(:mod:`attested_cortex.service.workers.checkpointing`) and the audit resources.

A cut extends the tree kept at the latest checkpoint's size by the events appended since
(at most ``max_leaves`` of them, so one cut of a large chain's first tree stays a bounded
transaction), keeps the perfect nodes they complete and signs the new size's root with the
audit signer's key as a C2SP checkpoint whose origin is the key's name. Before it extends, it
checks that the kept nodes still lead to the latest checkpoint's root: a tree rewritten under
the server is refused, never signed over (:class:`TreeMismatch`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from attested_cortex.attest import merkle, notes
from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.store import checkpoints as store
from attested_cortex.store.checkpoints import CheckpointRow
from attested_cortex.store.database import Conn, Database

#: At most this many events join the tree in one cut.
MAX_LEAVES = 100_000


class TreeMismatch(ConflictError):
    """The kept tree no longer leads to the latest checkpoint's root."""


async def cut(db: Database, signer: notes.Signer, *, max_leaves: int = MAX_LEAVES
              ) -> CheckpointRow | None:
    """Sign a checkpoint of the chain as it is now (or of its next ``max_leaves`` events);
    the latest checkpoint when nothing was appended since; None for an empty chain."""
    async with db.transaction() as conn:
        await store.lock(conn)
        last = await store.latest(conn)
        old = 0 if last is None else last.size
        head = await store.head_size(conn)
        if head <= old:
            return last
        new = min(head, old + max_leaves)
        frontier = await _frontier(conn, old, last)
        made: list[tuple[int, int, bytes]] = []
        for leaf in await store.leaves(conn, old + 1, new):
            made.extend(frontier.append(leaf))
        root = frontier.root()
        text = notes.Checkpoint(signer.name, new, root).text()
        row = CheckpointRow(new, root, signer.name, notes.sign(text, signer),
                            datetime.now(UTC))
        await store.insert(conn, made, row)
    return row


async def _frontier(conn: Conn, size: int, last: CheckpointRow | None) -> merkle.Frontier:
    if last is None:
        return merkle.Frontier()
    wanted = merkle.frontier_nodes(size)
    found = await store.nodes(conn, wanted)
    if len(found) != len(wanted):
        raise TreeMismatch("the audit tree lacks nodes of its latest checkpoint",
                           code="audit_tree_mismatch", size=size)
    frontier = merkle.Frontier.at(size, [found[node] for node in wanted])
    if frontier.root() != last.root:
        raise TreeMismatch(
            f"the audit tree of {size} events no longer has the root of its checkpoint",
            code="audit_tree_mismatch", size=size)
    return frontier


@dataclass(frozen=True, slots=True)
class Inclusion:
    """An event's inclusion proof in the tree of ``size`` events, and that tree's root."""

    sequence: int
    size: int
    leaf: bytes
    proof: list[bytes]
    root: bytes


async def inclusion(conn: Conn, *, sequence: int, size: int, covered: int | None = None
                    ) -> Inclusion:
    """The proof that event ``sequence`` is leaf ``sequence - 1`` of the tree of ``size``
    (a size no larger than the latest checkpoint's, ``covered`` when the caller read it:
    its nodes are kept), read in one statement with the nodes of the tree's root."""
    await _covered(conn, size, covered)
    if not 1 <= sequence <= size:
        raise InvalidInputError(f"event {sequence} is not in a tree of {size} events",
                                field="seq")
    ranges = merkle.inclusion_ranges(sequence - 1, size)
    tops = merkle.frontier_nodes(size)
    found = await store.nodes(conn, merkle.needed_nodes(ranges) | {(0, sequence - 1)}
                              | set(tops))
    return Inclusion(sequence, size, found[(0, sequence - 1)],
                     merkle.proof_hashes(ranges, found.__getitem__),
                     merkle.range_hash([found[node] for node in tops]))


async def inclusions(conn: Conn, *, sequences: Collection[int], size: int
                     ) -> dict[int, Inclusion]:
    """The inclusion proofs of several events in the tree of ``size`` (no larger than the
    latest checkpoint's, which the caller read), with one read of all the nodes they need:
    a read's receipts (ADR 0104) prove up to 500 memories at once."""
    tops = merkle.frontier_nodes(size)
    ranges, wanted = {}, set(tops)
    for sequence in sequences:
        if not 1 <= sequence <= size:
            raise InvalidInputError(f"event {sequence} is not in a tree of {size} events",
                                    field="seq")
        ranges[sequence] = merkle.inclusion_ranges(sequence - 1, size)
        wanted |= merkle.needed_nodes(ranges[sequence]) | {(0, sequence - 1)}
    found = await store.nodes(conn, wanted)
    root = merkle.range_hash([found[node] for node in tops])
    return {sequence: Inclusion(sequence, size, found[(0, sequence - 1)],
                                merkle.proof_hashes(r, found.__getitem__), root)
            for sequence, r in ranges.items()}


async def consistency(conn: Conn, *, old: int, new: int) -> list[bytes]:
    """The proof that the tree of ``new`` events extends the tree of ``old``."""
    await _covered(conn, new)
    if not 1 <= old <= new:
        raise InvalidInputError(f"no consistency proof from {old} to {new} events",
                                field="from")
    ranges = merkle.consistency_ranges(old, new)
    found = await store.nodes(conn, merkle.needed_nodes(ranges))
    return merkle.proof_hashes(ranges, found.__getitem__)


async def root_at(conn: Conn, size: int) -> bytes:
    """The root of the tree of ``size`` events (within the latest checkpoint)."""
    await _covered(conn, size)
    wanted = merkle.frontier_nodes(size)
    found = await store.nodes(conn, wanted)
    return merkle.range_hash([found[node] for node in wanted])


async def _covered(conn: Conn, size: int, covered: int | None = None) -> None:
    if covered is None:
        last = await store.latest(conn)
        covered = 0 if last is None else last.size
    if not 1 <= size <= covered:
        raise NotFoundError(
            f"no checkpoint covers a tree of {size} events (the latest is of {covered})",
            code="not_checkpointed")
