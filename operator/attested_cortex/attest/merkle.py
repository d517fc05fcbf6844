"""The audit chain as an RFC 9162 (RFC 6962) Merkle tree: hashes, proof layouts, verifiers.

Pure. Leaf ``i`` (0-based) of the tree is event ``i + 1``'s 32-byte hash; its leaf hash is
``SHA-256(0x00 || event_hash)`` and an inner node ``SHA-256(0x01 || left || right)``
(RFC 9162 §2.1.1), so a tree of ``n`` events is the tree of the first ``n`` events of the
chain and the C2SP ``tlog-checkpoint`` root of size ``n`` is :func:`root` of their hashes.

The server keeps the *perfect* subtrees (``2**level`` leaves starting at a multiple of
``2**level``) and answers a proof from them: :func:`inclusion_ranges` and
:func:`consistency_ranges` say which leaf ranges a proof is made of (RFC 9162 §2.1.3.1,
§2.1.4.1), :func:`perfect_parts` which stored nodes one range is folded from, and
:func:`range_hash` folds them. :class:`Frontier` is the compact range of a growing tree (the
audit walk computes every checkpointed root with it while it reads the chain). The
verifiers (:func:`verify_inclusion`, :func:`verify_consistency`, RFC 9162 §2.1.3.2 and
§2.1.4.2) serve the witness and ``audit verify --against-checkpoint``; the tests check the
server's proofs with an independent implementation instead.

Called by :mod:`.checkpointing`, :mod:`.auditing`, :mod:`attested_cortex.cli.witnessing`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

HASH_BYTES = 32
#: A perfect subtree: ``(level, index)`` covers leaves ``[index << level, (index+1) << level)``.
Node = tuple[int, int]
#: A leaf range ``[start, end)`` whose RFC 9162 subtree hash is one element of a proof.
Range = tuple[int, int]

_EMPTY = hashlib.sha256(b"").digest()


def leaf_hash(entry: bytes) -> bytes:
    """RFC 9162 leaf hash of an entry (here: an event's hash)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(width: int) -> int:
    """The largest power of two smaller than ``width`` (>= 2): the left subtree's width."""
    return 1 << ((width - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH of the given leaf hashes (the empty tree's is SHA-256 of nothing)."""
    if not leaves:
        return _EMPTY
    frontier = Frontier()
    for leaf in leaves:
        frontier.append(leaf)
    return frontier.root()


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The ranges of the audit path of leaf ``index`` in a tree of ``size``, bottom up."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    path: list[Range] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append((start + k, end))
            end = start + k
        else:
            path.append((start, start + k))
            start += k
    path.reverse()
    return path


def consistency_ranges(old: int, new: int) -> list[Range]:
    """The ranges of the RFC 9162 consistency proof from size ``old`` to ``new``, bottom up
    (empty when ``old`` is 0 or equals ``new``)."""
    if not 0 <= old <= new:
        raise ValueError(f"no consistency proof from {old} to {new}")
    if old in (0, new):
        return []
    path: list[Range] = []
    start, m, n, complete = 0, old, new, True
    while m != n:
        k = _split(n)
        if m <= k:
            path.append((start + k, start + n))
            n = k
        else:
            path.append((start, start + k))
            start, m, n, complete = start + k, m - k, n - k, False
    if not complete:
        path.append((start, start + n))
    path.reverse()
    return path


def perfect_parts(rng: Range) -> list[Node]:
    """The perfect subtrees whose fold (right to left) is the range's RFC 9162 hash.

    Every range of a proof starts at a multiple of its left subtree's width, so this is the
    binary decomposition of its width, largest first."""
    start, end = rng
    if not 0 <= start < end:
        raise ValueError(f"empty range {rng}")
    parts: list[Node] = []
    while start < end:
        width = end - start
        level = width.bit_length() - 1
        if start % (1 << level):
            raise ValueError(f"range {rng} is not one of an RFC 9162 proof")
        parts.append((level, start >> level))
        start += 1 << level
    return parts


def range_hash(parts: Sequence[bytes]) -> bytes:
    """Fold the hashes of :func:`perfect_parts` (in its order) into the range's hash."""
    acc = parts[-1]
    for left in reversed(parts[:-1]):
        acc = node_hash(left, acc)
    return acc


def proof_hashes(ranges: Iterable[Range], node: Callable[[Node], bytes]) -> list[bytes]:
    """The proof's hashes, given the stored perfect nodes by ``node``."""
    return [range_hash([node(part) for part in perfect_parts(rng)]) for rng in ranges]


def needed_nodes(ranges: Iterable[Range]) -> set[Node]:
    """Every perfect node the proof of ``ranges`` reads (fetched at once by the caller)."""
    return {part for rng in ranges for part in perfect_parts(rng)}


def frontier_nodes(size: int) -> list[Node]:
    """The perfect subtrees of a tree of ``size`` that its next leaves still join: one per
    set bit of ``size``, largest first (the compact range ``[0, size)``)."""
    return perfect_parts((0, size)) if size else []


@dataclass
class Frontier:
    """The compact range of a growing tree: enough to append leaves and say the root.

    ``nodes`` holds ``(level, hash)`` with strictly decreasing levels; :meth:`append`
    returns the perfect nodes each new leaf completes, ``(level, index, hash)``, so the
    caller can store them."""

    size: int = 0
    nodes: list[tuple[int, bytes]] = field(default_factory=list)

    @classmethod
    def at(cls, size: int, hashes: Sequence[bytes]) -> Frontier:
        """The frontier of a tree of ``size`` from the hashes of its :func:`frontier_nodes`."""
        levels = [level for level, _ in frontier_nodes(size)]
        if len(levels) != len(hashes):
            raise ValueError("one hash per frontier node")
        return cls(size, list(zip(levels, hashes, strict=True)))

    def append(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Add a leaf hash; the perfect nodes it completes (the leaf itself included)."""
        made = [(0, self.size, leaf)]
        level, digest = 0, leaf
        while self.nodes and self.nodes[-1][0] == level:
            _, left = self.nodes.pop()
            digest, level = node_hash(left, digest), level + 1
            made.append((level, self.size >> level, digest))
        self.nodes.append((level, digest))
        self.size += 1
        return made

    def root(self) -> bytes:
        """The root of the tree so far."""
        if not self.nodes:
            return _EMPTY
        return range_hash([digest for _, digest in self.nodes])


class ProofError(ValueError):
    """A proof that does not verify; the message says which check failed."""


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root an inclusion proof of ``leaf`` at ``index`` leads to."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("inclusion proof too short")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     expected_root: bytes) -> None:
    """Raise :class:`ProofError` unless ``proof`` puts ``leaf`` at ``index`` under the root."""
    if root_from_inclusion(index, size, leaf, proof) != expected_root:
        raise ProofError(f"inclusion proof of leaf {index} does not lead to the root of {size}")


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> None:
    """RFC 9162 §2.1.4.2: raise :class:`ProofError` unless the tree of ``new`` with
    ``new_root`` extends the tree of ``old`` with ``old_root``."""
    if not 0 <= old <= new:
        raise ProofError(f"size {new} does not extend size {old}")
    if old == new:
        if proof:
            raise ProofError("a proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofError(f"two different roots for size {old}")
        return
    if old == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise ProofError("empty consistency proof")
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the proof's first node
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof too long")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("consistency proof too short")
    if fr != old_root:
        raise ProofError(f"the proof does not lead to the root of size {old}")
    if sr != new_root:
        raise ProofError(f"the proof does not lead to the root of size {new}")
