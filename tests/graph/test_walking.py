"""kg/query's pure walk (store/graph/walking.py): levels, fewest hops, bounds and early stop.

No database: a backend's part is "fetch the active links out of the frontier", played here by a
dict of adjacency lists, so the walk is checked against tests/graph/reference.py directly,
including the truncated answers a real graph rarely produces at exactly the boundary.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from attested_cortex.store.graph.base import MAX_EDGES, Edge, Node, Subgraph
from attested_cortex.store.graph.walking import LevelWalk, make_edge
from tests.graph import reference

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _ids(count: int) -> list[uuid.UUID]:
    """Ids whose order is their index, so expected orderings are easy to write."""
    return [uuid.UUID(int=i + 1) for i in range(count)]


def _rows(edges: list[tuple[int, int]], ids: list[uuid.UUID]) -> list[Edge]:
    return [Edge(uuid.UUID(int=10_000 + n), ids[a], ids[b], "related_to")
            for n, (a, b) in enumerate(edges)]


def _walk(rows: list[Edge], start: uuid.UUID, depth: int, *, max_nodes: int = 2000,
          ) -> tuple[Subgraph, list[list[uuid.UUID]]]:
    """Run the walk the way a backend does; also return every frontier it asked for."""
    out: dict[uuid.UUID, list[Edge]] = {}
    for row in rows:
        out.setdefault(row[1], []).append(row)
    walk = LevelWalk(start, depth, max_nodes=max_nodes)
    asked = []
    while walk.frontier:
        asked.append(list(walk.frontier))
        walk.add_level([row for node in walk.frontier for row in out.get(node, [])])
    return walk.result(), asked


def test_depth_counts_hops_and_edges_leave_only_nodes_below_it() -> None:
    a, b, c, d = _ids(4)
    rows = _rows([(0, 1), (1, 2), (2, 3)], [a, b, c, d])
    graph, asked = _walk(rows, a, 2)
    assert graph.nodes == (Node(0, a), Node(1, b), Node(2, c))
    assert [e.dst_id for e in graph.edges] == [b, c]  # c -> d leaves a node at the depth
    assert asked == [[a], [b]] and not graph.truncated


def test_a_node_keeps_its_fewest_hops_and_cycles_end() -> None:
    a, b, c = _ids(3)
    rows = _rows([(0, 1), (1, 2), (0, 2), (2, 0), (1, 0)], [a, b, c])
    graph, asked = _walk(rows, a, 5)
    assert graph.nodes == (Node(0, a), Node(1, b), Node(1, c))
    assert len(graph.edges) == 5  # every link out of a node below depth 5, back-links too
    assert asked == [[a], [b, c]]  # nothing new at level 2: the walk is over


def test_nodes_are_ordered_by_depth_then_id_and_edges_by_id() -> None:
    ids = _ids(6)
    rows = _rows([(0, 5), (0, 3), (0, 4), (3, 1), (5, 2)], ids)
    rows.reverse()
    graph, _ = _walk(rows, ids[0], 3)
    assert [(n.depth, n.id) for n in graph.nodes] == [
        (0, ids[0]), (1, ids[3]), (1, ids[4]), (1, ids[5]), (2, ids[1]), (2, ids[2])]
    assert [e.id.int for e in graph.edges] == sorted(e.id.int for e in graph.edges)
    assert all(isinstance(e, Edge) for e in graph.edges)


def test_exactly_max_nodes_is_not_truncated() -> None:
    ids = _ids(3)
    graph, _ = _walk(_rows([(0, 1), (0, 2)], ids), ids[0], 5, max_nodes=3)
    assert len(graph.nodes) == 3 and not graph.truncated


def test_one_more_node_truncates_and_keeps_only_edges_between_kept_nodes() -> None:
    ids = _ids(5)
    rows = _rows([(0, 1), (0, 2), (1, 3), (2, 4), (1, 2)], ids)
    graph, asked = _walk(rows, ids[0], 5, max_nodes=4)
    assert graph.truncated
    assert [n.id for n in graph.nodes] == [ids[0], ids[1], ids[2], ids[3]]
    kept = {n.id for n in graph.nodes}
    assert {(e.src_id, e.dst_id) for e in graph.edges} == {
        (ids[0], ids[1]), (ids[0], ids[2]), (ids[1], ids[3]), (ids[1], ids[2])}
    assert all(e.src_id in kept and e.dst_id in kept for e in graph.edges)
    assert asked == [[ids[0]], [ids[1], ids[2]], [ids[3], ids[4]]]  # depth 2 may still be kept


def test_the_walk_stops_once_shallower_levels_fill_the_cut() -> None:
    ids = _ids(8)
    # start -> 3 children -> 4 grandchildren -> 1 great-grandchild, cut at 3 nodes
    rows = _rows([(0, 1), (0, 2), (0, 3), (1, 4), (2, 5), (3, 6), (3, 7), (7, 4)], ids)
    graph, asked = _walk(rows, ids[0], 5, max_nodes=3)
    assert asked == [[ids[0]], ids[1:4]]  # depths 0-1 fill the cut: depth 2 is never expanded
    assert graph.truncated and [n.id for n in graph.nodes] == ids[:3]


def test_edges_beyond_max_edges_are_cut_and_flagged() -> None:
    a, b = _ids(2)
    rows = [Edge(uuid.UUID(int=10_000 + n), a, b, f"x-r{n}") for n in range(MAX_EDGES + 1)]
    graph, _ = _walk(rows, a, 1)
    assert graph.truncated and len(graph.edges) == MAX_EDGES
    assert graph.edges[-1].id == uuid.UUID(int=10_000 + MAX_EDGES - 1)


def test_make_edge_builds_an_edge_from_a_row() -> None:
    row = (uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "contradicts")
    edge = make_edge(row)
    assert type(edge) is Edge and edge == Edge(*row) and edge.relation == "contradicts"


def test_result_can_be_asked_twice() -> None:
    ids = _ids(4)
    walk = LevelWalk(ids[0], 2, max_nodes=1)
    walk.add_level(_rows([(0, 1), (0, 2), (0, 3)], ids))
    assert walk.frontier == []
    assert walk.result() == walk.result()
    assert walk.result().truncated and walk.result().nodes == (Node(0, ids[0]),)


@settings(max_examples=150, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 24)), max_size=90),
    depth=st.integers(1, 5),
    max_nodes=st.integers(1, 30),
)
def test_matches_the_reference_with_and_without_truncation(
    edges: list[tuple[int, int]], depth: int, max_nodes: int
) -> None:
    ids = _ids(25)
    rows = _rows([(a, b) for a, b in edges if a != b], ids)
    graph, _ = _walk(rows, ids[0], depth, max_nodes=max_nodes)

    ref_links = [reference.RefLink(i, s, d, r, AT, None) for i, s, d, r in rows]
    nodes, edge_ids = reference.query(ref_links, set(ids), start=ids[0], depth=depth, at=AT)
    ordered = sorted(nodes.items(), key=lambda item: (item[1], item[0].int))
    kept = {node for node, _ in ordered[:max_nodes]}
    by_id = {row[0]: row for row in rows}
    expected_edges = sorted((i for i in edge_ids if by_id[i][1] in kept and by_id[i][2] in kept),
                            key=lambda i: i.int)

    assert graph.nodes == tuple(Node(d, n) for n, d in ordered[:max_nodes])
    assert [e.id for e in graph.edges] == expected_edges
    assert graph.truncated == (len(nodes) > max_nodes)
