"""The signed audit record of every mutating spoke-memory op (ADR 0067).

:func:`record_op` appends one ``spoke.<op>`` event to the chain, in the op's transaction,
after its receipt is settled (:func:`.spoke_receipts.mutate`; nothing follows it there, so
it holds the chain lock only until the commit): the op, the principal, the space, the
receipt and the records of the rows the op left (:mod:`attested_cortex.attest.spoke_records`),
read in the same transaction, which holds their locks. Signed with the principal's key when
the cortex holds it, as the native write records are. A refused op rolls back with its
record, so the chain names exactly the ops that happened.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from attested_cortex.attest.auditing import record_event
from attested_cortex.attest.cbor import CborValue
from attested_cortex.attest.spoke_records import (
    SpokeKind,
    candidate_record,
    event_type,
    grant_record,
    op_record,
    space_record,
    subject_record,
)
from attested_cortex.service.pipeline import write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.store import spoke_candidates as candidates
from attested_cortex.store import spoke_memory as rows
from attested_cortex.store.database import Conn

Row = dict[str, Any]
Records = dict[SpokeKind, list[dict[str, CborValue]]]
_SPACE_OPS: Final = frozenset({"memory.spaces.freeze", "memory.spaces.unfreeze"})
_SUBJECT_OPS: Final = frozenset({"memory.subjects.ensure", "memory.subjects.fence"})
_GRANT_OPS: Final = frozenset({"memory.grants.grant", "memory.grants.revoke"})
#: The ops that make or consume candidates, and how many of their refs are candidates.
_CANDIDATE_OPS: Final = {"memory.capture": None, "memory.candidates.dismiss": 1,
                         "memory.candidates.review": 1}


async def record_op(svc: Services, conn: Conn, caller: Caller, receipt: Row) -> None:
    """Append the op record of ``receipt`` (settled in this transaction) to the chain."""
    touched = await _touched(conn, receipt)
    await record_event(conn, agent_id=caller.agent_id, event_type=event_type(receipt["op"]),
                       payload=op_record(receipt, touched),
                       signer=write_records.signer(svc, caller))


async def _touched(conn: Conn, receipt: Row) -> Records:
    """The records of the covered rows the op changed (its refs name them)."""
    op, space_id, refs = receipt["op"], receipt["space_id"], list(receipt["refs"])
    if op in _SPACE_OPS:
        space = await rows.space(conn, space_id)
        return {"space": [space_record(space)]} if space is not None else {}
    if op in _SUBJECT_OPS and refs:
        subject = await rows.subject(conn, space_id, refs[0])
        return {"subject": [subject_record(subject)]} if subject is not None else {}
    if op in _GRANT_OPS:  # a revoke names the grants derived from it too (ADR 0082)
        grants = [await rows.grant(conn, space_id, uuid.UUID(ref)) for ref in refs]
        return {"grant": [grant_record(g) for g in grants if g is not None]} if refs else {}
    if op in _CANDIDATE_OPS:
        found = [await candidates.candidate(conn, space_id, uuid.UUID(ref))
                 for ref in refs[:_CANDIDATE_OPS[op]]]
        return {"candidate": [candidate_record(row) for row in found if row is not None]}
    return {}
