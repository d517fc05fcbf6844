"""Native reads of the spoke-memory family's records (issue 37 item 3, ADR 0083).

A space's records are memories in its namespace (ADR 0060), so a native read scope on the
namespace used to read them whatever the family's grants said. Now a record is read
through the native API (``GET /v1/memories/{id}`` and its verify, the listing, recall and
the graph's nodes, over HTTP and MCP) only by its space's authority (``memory.override``
on the namespace); everyone else reads it through the family, under its grants. A plain
memory in the same namespace is untouched. The core's memories, recall and graph operations
ask it through :data:`GATE`, which the assembly puts in ``Services.records`` (ADR 0125): the
family depends on the core, not the other way.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from attested_cortex.service.pipeline.context import Caller, NativeRecords
from attested_cortex.service.resources.spoke import access
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


class _Gate:
    """The family's answers to the core (:class:`NativeRecords`)."""

    async def hidden(self, conn: Conn, caller: Caller,
                     namespaces: Mapping[uuid.UUID, str]) -> set[uuid.UUID]:
        return await hidden(conn, caller, namespaces)

    def hides(self, caller: Caller, memory_id: uuid.UUID, namespace: str,
              records: frozenset[uuid.UUID]) -> bool:
        return hides(caller, memory_id, namespace, records)

    async def native_write(self, conn: Conn, memory_id: uuid.UUID) -> None:
        await access.native_write(conn, memory_id)


#: Given to ``Services.records`` by :func:`attested_cortex.server.assembling.open_services`.
GATE: NativeRecords = _Gate()
