"""Knowledge-graph backends: one interface (``base.GraphBackend``), two implementations.

``cte.CteBackend`` (recursive CTEs, always available) and ``age.AgeBackend`` (Cypher on Apache
AGE over a mirrored graph), picked by ``selecting.select_backend``; ``age_setup`` creates and
repairs the mirror. Callers: the service layer (kg/* operations) and ``store.links`` (writes).
"""

from attested_cortex.store.graph.base import (
    BackendName,
    Edge,
    GraphBackend,
    Node,
    Path,
    PathSet,
    RequestedBackend,
    Subgraph,
    Timeline,
)

__all__ = [
    "BackendName",
    "Edge",
    "GraphBackend",
    "Node",
    "Path",
    "PathSet",
    "RequestedBackend",
    "Subgraph",
    "Timeline",
]
