"""The core operations' side of native reads and writes of the spoke family's records
(ADR 0083, ADR 0084): they ask :attr:`Services.records`, which the assembly fills with the
family's gate (ADR 0125), so no core operation module imports the family. Called by
:mod:`.memories`, :mod:`.recall` and :mod:`.kg`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from attested_cortex.errors import NotFoundError
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.store.database import Conn


async def hidden(svc: Services, conn: Conn, caller: Caller,
                 namespaces: Mapping[uuid.UUID, str]) -> set[uuid.UUID]:
    """Of the memories ``namespaces`` names (id -> namespace), the family records the caller
    may not read natively."""
    if svc.records is None or not namespaces:
        return set()
    return await svc.records.hidden(conn, caller, namespaces)


def hides(svc: Services, caller: Caller, memory_id: uuid.UUID, namespace: str,
          records: frozenset[uuid.UUID]) -> bool:
    """:func:`hidden` for one memory of a read that already knows its ``records``."""
    return svc.records is not None and svc.records.hides(caller, memory_id, namespace, records)


async def require_readable(svc: Services, conn: Conn, caller: Caller, memory_id: uuid.UUID,
                           namespace: str) -> None:
    """404, as for a memory that does not exist, when it is a record the caller may not
    read natively (ids leak nothing)."""
    if await hidden(svc, conn, caller, {memory_id: namespace}):
        raise NotFoundError(f"memory {memory_id} does not exist", id=str(memory_id))


async def native_write(svc: Services, conn: Conn, memory_id: uuid.UUID) -> None:
    """409 ``space_frozen``, ``subject_fenced`` or ``context_fenced`` for a native update or
    delete of a record, as the family's own writes answer; nothing for any other memory."""
    if svc.records is not None:
        await svc.records.native_write(conn, memory_id)
