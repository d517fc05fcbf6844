"""Receipts on spoke-memory record reads (issue 40, ADR 0104): ``memory.records.get``/
``list`` and ``memory.recall`` with ``receipts: true``. A record is proved by the op record
that last wrote it, which migration 0037's ``spoke_row_records`` indexes: the record of the
row as read, rebuilt, must be the one that op record carries, else ``null`` (the deep audit
names it). The proofs themselves are the core's (:func:`receipts.proved`); this half lives
with the family so the core never imports it (ADR 0125). Called by :mod:`.ops` and
:mod:`.reading`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attested_cortex.attest.spoke_records import record_record
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.resources.receipts import proved
from attested_cortex.service.resources.spoke.audit import differing_from
from attested_cortex.store import events
from attested_cortex.store.events import HeldRecord
from attested_cortex.store.spoke import row_records as row_records


async def record_receipts(svc: Services, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The ``receipts`` of a spoke answer returning the record rows ``rows`` (keyed by
    record id in ``memories``; 404 ``no_checkpoints`` as
    :func:`attested_cortex.service.resources.receipts.receipts`)."""
    expected = {str(r["memory_id"]): record_record(r) for r in rows}
    async with svc.db.connection() as conn:
        latest = await row_records.latest_many(conn, "record", expected)
        held = await events.held_at(conn, list(latest.values()))
        vouched = {s: await events.vouched_payload(conn, s) for s in held}
    by_record: dict[str, HeldRecord | None] = {}
    for record_id, record in expected.items():
        event = held.get(latest.get(record_id, 0))
        same = event is not None and differing_from(
            "record", record_id, record, vouched.get(event.sequence)) == []
        by_record[record_id] = event if same else None
    return await proved(svc, by_record)
