"""Rebuild migration 0037's index of the latest op record of each spoke-memory row from the
chain (ADR 0087 section 9).

Called by :func:`attested_cortex.service.resources.spoke.audit.index_rows` at a start that
finds the index empty (the upgrade), and by :mod:`attested_cortex.bundles.importing` in the
import's transaction (a bundle does not carry the derived table). The op path keeps the
index itself (:func:`~attested_cortex.service.resources.spoke.audit.record_op`).
"""

from __future__ import annotations

from attested_cortex.attest.decoding import decode
from attested_cortex.attest.spoke_records import EVENT_PREFIX, key_of, recorded_rows
from attested_cortex.errors import InvalidInputError
from attested_cortex.store import scanning
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import row_records as row_records


async def rebuild(conn: Conn) -> int:
    """Note the latest op record of every row the chain's op records name (an unreadable
    one is skipped: the deep audit names it); how many rows. An op checks that the record
    noted is vouched for by the key before believing it."""
    latest: dict[tuple[str, str], int] = {}
    async for sequence, _, payload in scanning.prefixed_records(conn, EVENT_PREFIX):
        try:
            found = recorded_rows(decode(payload)) or []
        except (InvalidInputError, KeyError):
            continue
        for kind, record in found:
            latest[kind, key_of(kind, record)] = sequence
    await row_records.note(conn, [(kind, key, seq) for (kind, key), seq in latest.items()])
    return len(latest)
