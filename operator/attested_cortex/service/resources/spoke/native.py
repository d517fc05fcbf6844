"""Native reads of the spoke-memory family's records (issue 37 item 3, ADR 0083).

A space's records are memories in its namespace (ADR 0060), so a native read scope on the
namespace used to read them whatever the family's grants said. Now a record is read
through the native API (``GET /v1/memories/{id}`` and its verify, the listing, recall and
the graph's nodes, over HTTP and MCP) only by its space's authority (``memory.override``
on the namespace); everyone else reads it through the family, under its grants. A plain
memory in the same namespace is untouched. Called by :mod:`.memories`, :mod:`.recall` and
:mod:`.kg`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from attested_cortex.errors import NotFoundError
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import memory as rows


async def hidden(conn: Conn, caller: Caller,
                 namespaces: Mapping[uuid.UUID, str]) -> set[uuid.UUID]:
    """Of the memories ``namespaces`` names (id -> namespace), the family records the
    caller may not read natively: one statement, none when it is the authority of each."""
    maybe = [i for i, ns in namespaces.items()
             if not caller.scopes.allows("memory.override", ns)]
    return await rows.records_among(conn, maybe) if maybe else set()


def hides(caller: Caller, memory_id: uuid.UUID, namespace: str,
          records: frozenset[uuid.UUID]) -> bool:
    """:func:`hidden` for one memory of a read that already knows its ``records`` (the
    listing's statement says which of its rows are records: no statement more)."""
    return memory_id in records and not caller.scopes.allows("memory.override", namespace)


async def require_readable(conn: Conn, caller: Caller, memory_id: uuid.UUID,
                           namespace: str) -> None:
    """404, as for a memory that does not exist, when it is a record the caller may not
    read natively (ids leak nothing)."""
    if await hidden(conn, caller, {memory_id: namespace}):
        raise NotFoundError(f"memory {memory_id} does not exist", id=str(memory_id))
