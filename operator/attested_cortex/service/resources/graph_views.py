"""JSON views of links and graph answers."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from attested_cortex.service.pipeline.wire_views import link_view
from attested_cortex.store.graph.base import PathSet, Subgraph, Timeline

__all__ = ["link_view", "paths_view", "subgraph_view", "timeline_view"]


def subgraph_view(graph: Subgraph) -> dict[str, Any]:
    """kg/query's answer as JSON.

    Every edge end is a node (``walking.LevelWalk`` keeps only those edges), so each node's
    text is made once and looked up by the uuid's integer. The texts themselves are made in
    C (:func:`_texts`): ``str(uuid)`` is Python code (~1.5 µs here) and a 2000-node answer
    has 7000 ids. An end that is not a node (no backend builds one) still gets its text.
    """
    node_texts = _texts([n.id for n in graph.nodes])
    names = dict(zip((n.id.int for n in graph.nodes), node_texts, strict=True))
    edge_texts = _texts([e.id for e in graph.edges])
    return {
        "nodes": [{"id": text, "depth": n.depth}
                  for n, text in zip(graph.nodes, node_texts, strict=True)],
        "edges": [{"id": text, "src_id": names.get(e.src_id.int) or str(e.src_id),
                   "dst_id": names.get(e.dst_id.int) or str(e.dst_id), "relation": e.relation}
                  for e, text in zip(graph.edges, edge_texts, strict=True)],
        "truncated": graph.truncated,
    }


def _texts(ids: list[uuid.UUID]) -> list[str]:
    """The canonical texts of ``ids``, made in C: orjson writes a UUID as its text, and
    reading the array back costs a tenth of calling ``str`` on each."""
    texts: list[str] = orjson.loads(orjson.dumps(ids))
    return texts


def paths_view(found: PathSet) -> dict[str, Any]:
    """kg/paths' answer as JSON."""
    return {
        "paths": [{"hops": p.hops, "links": [str(i) for i in p.links],
                   "nodes": [str(i) for i in p.nodes]} for p in found.paths],
        "truncated": found.truncated,
    }


def timeline_view(memory_id: str, timeline: Timeline) -> dict[str, Any]:
    """kg/timeline's answer as JSON."""
    return {"memory_id": memory_id, "links": [link_view(link) for link in timeline.links],
            "truncated": timeline.truncated}
