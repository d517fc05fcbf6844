"""Receipts: the inclusion proof of the event that last wrote each memory a read returns
(issue 40, ADR 0104). Asked with ``receipts: true`` on a get, a listing or a recall (HTTP
and MCP); built after the read answered, from what it returned. Called by
``server/routes/memories.py``, ``server/routes/recall.py`` and the MCP tools.

A memory's last write is found the way the deep audit finds it: its record, rebuilt from the
row as read (:func:`attested_cortex.attest.records.memory_record`), is looked up by digest
among the memory events of the chain. All proofs are against one checkpoint (the latest, cut
now when it does not hold every event yet), read in one statement, and the answer carries
that checkpoint's signed note with its witnesses' cosignatures: a client keeps the receipts
and checks them later against any checkpoint a witness cosigned, by a consistency proof.
The rows are read again by id (a recall's hits carry only what it ranks and shows), so a
receipt is for the row as it is when the receipt is made: a write between the answer and
its receipts shows as a revision the client did not get. A memory whose row matches no
record (written behind the server, or before records existed) gets ``null``: the deep
audit names it.

A spoke-memory record is proved the same way (:func:`proved`) by the family itself
(:mod:`attested_cortex.service.resources.spoke.proofs`, ADR 0125): the core does not know it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from attested_cortex.attest import cbor, checkpointing
from attested_cortex.attest.records import MEMORY_EVENTS, memory_record, sha256
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.resources.audit_proofs import latest_checkpoint, log_key
from attested_cortex.store import checkpoints, events, signatures
from attested_cortex.store import memories as stored
from attested_cortex.store.events import HeldRecord
from attested_cortex.store.memories import Memory


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


async def receipts(svc: Services, memories: Sequence[Memory]) -> dict[str, Any]:
    """The ``receipts`` of an answer returning ``memories`` (404 ``no_checkpoints`` on a
    cortex without an audit signer: it signs no checkpoints to prove against)."""
    async with svc.db.connection() as conn:
        # the rows as stored: a recall's hits carry only the columns it ranks and shows
        memories = await stored.get_many(conn, [m.id for m in memories])
        signed = await signatures.of_revisions(conn, [(m.id, m.revision) for m in memories])
        digests = {str(m.id): sha256(cbor.encode(memory_record(m, signed.get(m.id))))
                   for m in memories}
        found = await events.held_records(conn, event_types=MEMORY_EVENTS,
                                          payload_hashes=sorted(set(digests.values())))
    return await proved(svc, {m: found.get(d) for m, d in digests.items()})


async def proved(svc: Services, found: dict[str, HeldRecord | None]) -> dict[str, Any]:
    """The answer's ``receipts``: each found event's inclusion proof, all against one
    checkpoint (the latest, cut now when it does not hold them all)."""
    held_events = [h for h in found.values() if h is not None]
    checkpoint = await latest_checkpoint(svc, covering=max(
        (h.sequence for h in held_events), default=0))
    async with svc.db.connection() as conn:
        proofs = await checkpointing.inclusions(
            conn, sequences={h.sequence for h in held_events}, size=checkpoint.size)
        lines = await checkpoints.cosignatures(conn, checkpoint.size)
    by_memory: dict[str, dict[str, Any] | None] = {}
    for memory_id, held in found.items():
        if held is None:
            by_memory[memory_id] = None
            continue
        proof = proofs[held.sequence]
        by_memory[memory_id] = {
            "seq": held.sequence, "leaf_index": held.sequence - 1,
            "event_type": held.event_type, "event_hash": _b64(held.hash),
            "record": _b64(held.payload), "leaf_hash": _b64(proof.leaf),
            "proof": [_b64(h) for h in proof.proof]}
    return {"tree_size": checkpoint.size, "root_hash": _b64(checkpoint.root),
            "checkpoint": checkpoint.note + "".join(f"{line}\n" for line in lines),
            "log_key": log_key(svc), "memories": by_memory}
