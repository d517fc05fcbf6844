"""Choosing the live graph backend at startup: ``Auto``, ``AGE`` or ``CTE``.

Called once by the server's startup (and ``cortexctl doctor``) with a connection prepared by
``age_setup.configure_age_connection`` where AGE is wanted; the result is reported as
``kg_backend`` by /v1/capabilities. Asking for AGE where it is missing is a startup error,
never a silent fallback. ``Auto`` follows docs/adr/0003-graph-backend-auto.md: the seed's rule
prefers AGE only where it measured at least 30% faster than CTE at depth 5.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from attested_cortex.errors import NotReadyError
from attested_cortex.store.graph.age import AgeBackend
from attested_cortex.store.graph.age_setup import age_ready
from attested_cortex.store.graph.base import GraphBackend, RequestedBackend
from attested_cortex.store.graph.cte import CteBackend

#: Set from the measurement in docs/adr/0003-graph-backend-auto.md (AGE/CTE p95 at depth 5).
AUTO_PREFERS_AGE: Final = False


async def select_backend(
    conn: psycopg.AsyncConnection[Any], requested: RequestedBackend
) -> GraphBackend:
    """The backend to serve with; raises NotReadyError when AGE is required but absent."""
    if requested == "CTE":
        return CteBackend()
    ready = await age_ready(conn)
    if requested == "AGE":
        if not ready:
            raise NotReadyError(
                "graph backend AGE was requested but the database has no 'age' extension or no "
                "cortex_graph; install Apache AGE and run `cortexctl migrate`, or choose CTE/Auto",
                code="age_unavailable",
            )
        return AgeBackend()
    return AgeBackend() if ready and AUTO_PREFERS_AGE else CteBackend()
