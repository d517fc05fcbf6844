"""kg/query's JSON view (service/resources/graph_views.py): every id as canonical text, in
answer order."""

from __future__ import annotations

import uuid

from attested_cortex.service.resources.graph_views import subgraph_view
from attested_cortex.store.graph.base import Edge, Node, Subgraph


def test_ids_are_canonical_text_and_order_is_kept() -> None:
    a, b, c = (uuid.UUID(int=n) for n in (3, 1, 2))
    link1, link2 = uuid.uuid4(), uuid.uuid4()
    graph = Subgraph(nodes=(Node(0, a), Node(1, b), Node(1, c)),
                     edges=(Edge(link1, a, b, "related_to"), Edge(link2, a, c, "x-cites")),
                     truncated=True)
    assert subgraph_view(graph) == {
        "nodes": [{"id": str(a), "depth": 0}, {"id": str(b), "depth": 1},
                  {"id": str(c), "depth": 1}],
        "edges": [{"id": str(link1), "src_id": str(a), "dst_id": str(b), "relation": "related_to"},
                  {"id": str(link2), "src_id": str(a), "dst_id": str(c), "relation": "x-cites"}],
        "truncated": True,
    }


def test_an_edge_end_outside_the_nodes_still_gets_its_text() -> None:
    start, elsewhere = uuid.uuid4(), uuid.uuid4()
    graph = Subgraph(nodes=(Node(0, start),),
                     edges=(Edge(uuid.uuid4(), start, elsewhere, "supersedes"),),
                     truncated=False)
    edge = subgraph_view(graph)["edges"][0]
    assert (edge["src_id"], edge["dst_id"]) == (str(start), str(elsewhere))
