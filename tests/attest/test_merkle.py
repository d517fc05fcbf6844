"""The audit tree's hashes and proofs (attest/merkle.py) against the RFC 6962 reference
vectors (transparency-dev/merkle's testonly data) and against pymerkle, an independent
RFC 9162 implementation: inclusion proofs in trees of 1..1000 events (every leaf up to 70,
a sample above) and at every power of two +- 1 to 2**13, and consistency proofs' hashes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from pymerkle import InclusionProof, InmemoryTree
from pymerkle.core import _inclusion_path_layout

from attested_cortex.attest import merkle

# RFC 6962 reference leaves and the root of every size 0..8 (transparency-dev/merkle).
LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]
CONSISTENCY = [
    (2, 8, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]


class Tree:
    """The server's way to answer: perfect nodes kept as a growing frontier makes them."""

    def __init__(self, entries: list[bytes]) -> None:
        self.leaves = [merkle.leaf_hash(e) for e in entries]
        self.nodes: dict[merkle.Node, bytes] = {}
        frontier = merkle.Frontier()
        self.roots = [merkle.root([])]
        for leaf in self.leaves:
            for level, index, digest in frontier.append(leaf):
                self.nodes[(level, index)] = digest
            self.roots.append(frontier.root())

    def inclusion(self, index: int, size: int) -> list[bytes]:
        return merkle.proof_hashes(merkle.inclusion_ranges(index, size), self.nodes.__getitem__)

    def consistency(self, old: int, new: int) -> list[bytes]:
        return merkle.proof_hashes(merkle.consistency_ranges(old, new), self.nodes.__getitem__)


def test_the_reference_roots_and_proofs() -> None:
    tree = Tree(LEAVES)
    assert [r.hex() for r in tree.roots] == ROOTS
    assert merkle.root(tree.leaves[:5]).hex() == ROOTS[5]
    for index, size, proof in INCLUSION:
        assert [h.hex() for h in tree.inclusion(index, size)] == proof
        merkle.verify_inclusion(index, size, tree.leaves[index],
                                [bytes.fromhex(h) for h in proof], bytes.fromhex(ROOTS[size]))
    for old, new, proof in CONSISTENCY:
        assert [h.hex() for h in tree.consistency(old, new)] == proof
        merkle.verify_consistency(old, new, bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new]),
                                  [bytes.fromhex(h) for h in proof])


def _entries(n: int) -> list[bytes]:
    return [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(n)]


N = 1 << 13
ENTRIES = _entries(N)


@pytest.fixture(scope="module")
def ours() -> Tree:
    return Tree(ENTRIES)


@pytest.fixture(scope="module")
def theirs() -> InmemoryTree:
    tree = InmemoryTree(algorithm="sha256")
    tree.append_entries(ENTRIES)
    return tree


def _sizes() -> Iterator[int]:
    yield from range(1, 1001)
    for k in range(1, 14):
        yield from (s for s in ((1 << k) - 1, 1 << k, (1 << k) + 1) if 1000 < s <= N)


def _independently_included(theirs: InmemoryTree, ours: Tree, index: int, size: int) -> None:
    rule, _ = _inclusion_path_layout(index + 1, size)
    proof = InclusionProof("sha256", True, size, index + 1, rule,
                           [ours.leaves[index], *ours.inclusion(index, size)])
    proof.verify(ours.leaves[index], theirs.get_root(size), index=index + 1, size=size)


def _independently_consistent(theirs: InmemoryTree, ours: Tree, old: int, new: int) -> None:
    """pymerkle's consistency proofs take another shape than RFC 9162's (they prove the
    next leaf's inclusion), so here it vouches for every hash of ours (the subtree hash of
    its range) and our RFC 9162 verifier (held to the reference vectors) for the layout;
    the real witness test (tests/attest/test_real_witness.py) checks whole proofs."""
    ranges = merkle.consistency_ranges(old, new)
    path = ours.consistency(old, new)
    assert path == [theirs._get_root(start, end) for start, end in ranges]
    merkle.verify_consistency(old, new, theirs.get_root(old), theirs.get_root(new), path)


def test_every_size_has_pymerkles_root_and_proofs(ours: Tree, theirs: InmemoryTree) -> None:
    for size in _sizes():
        assert ours.roots[size] == theirs.get_root(size), size
        leaves = {0, size - 1, size // 2, (size * 7) // 11, max(0, size - 2)}
        for index in leaves:
            _independently_included(theirs, ours, index, size)
            merkle.verify_inclusion(index, size, ours.leaves[index], ours.inclusion(index, size),
                                    ours.roots[size])
        for old in {1, size // 2 or 1, size - 1 or 1, size, (size * 3) // 5 or 1}:
            _independently_consistent(theirs, ours, old, size)
            merkle.verify_consistency(old, size, ours.roots[old], ours.roots[size],
                                      ours.consistency(old, size))


def test_every_leaf_of_small_trees(ours: Tree, theirs: InmemoryTree) -> None:
    for size in range(1, 70):
        for index in range(size):
            _independently_included(theirs, ours, index, size)
        for old in range(1, size + 1):
            _independently_consistent(theirs, ours, old, size)


def test_a_wrong_proof_does_not_verify(ours: Tree) -> None:
    proof = ours.inclusion(3, 10)
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(4, 10, ours.leaves[3], proof, ours.roots[10])
    with pytest.raises(merkle.ProofError):
        merkle.verify_inclusion(3, 10, ours.leaves[3], proof[:-1], ours.roots[10])
    consistency = ours.consistency(6, 10)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(6, 10, ours.roots[5], ours.roots[10], consistency)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(6, 10, ours.roots[6], ours.roots[9], consistency)
    with pytest.raises(merkle.ProofError):
        merkle.verify_consistency(7, 7, ours.roots[7], ours.roots[6], [])


def test_a_frontier_resumes_where_it_stopped(ours: Tree) -> None:
    for size in (1, 2, 3, 7, 8, 100, 1023):
        frontier = merkle.Frontier.at(
            size, [ours.nodes[node] for node in merkle.frontier_nodes(size)])
        for leaf in ours.leaves[size:size + 50]:
            frontier.append(leaf)
        assert frontier.root() == ours.roots[frontier.size]
