"""The signed audit record of every mutating spoke-memory op (ADR 0067).

:func:`record_op` appends one ``spoke.<op>`` event to the chain, in the op's transaction,
after its receipt is settled (:func:`.receipts.mutate`; nothing follows it there, so
it holds the chain lock only until the commit): the op, the principal, the space, the
receipt and the records of the rows the op left (:mod:`attested_cortex.attest.spoke_records`),
read in the same transaction, which holds their locks. Signed with the principal's key when
the cortex holds it, as the native write records are. A refused op rolls back with its
record, so the chain names exactly the ops that happened. Each record also names the side
rows of the records the op wrote (kind ``record``: placement, provenance; issue 37 item 13),
and :func:`adopt_records` covers, once, those written before (ADR 0087).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from attested_cortex.attest import spoke_index
from attested_cortex.attest.auditing import record_event
from attested_cortex.attest.cbor import CborValue
from attested_cortex.attest.decoding import decode
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.records import differing
from attested_cortex.attest.spoke_records import (
    ADOPT_OP,
    BUILDERS,
    DEFAULTS,
    EVENT_PREFIX,
    SpokeKind,
    adopt_record,
    candidate_record,
    event_type,
    grant_record,
    key_of,
    op_record,
    record_record,
    recorded_rows,
    space_record,
    subject_record,
)
from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.service.pipeline import write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.store import events, scanning
from attested_cortex.store.database import Conn, Database
from attested_cortex.store.spoke import candidates as candidates
from attested_cortex.store.spoke import memory as rows
from attested_cortex.store.spoke import row_records as row_records

Row = dict[str, Any]
#: The acting agent of adoption records when the server has no ``audit_signer``.
ADOPTER: Final = "cortex:record-adopter"
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
    written = await _records(conn, receipt)
    if written:
        touched["record"] = [record_record(row) for row in written]
    payload = op_record(receipt, touched)
    event = await record_event(conn, agent_id=caller.agent_id,
                               event_type=event_type(receipt["op"]), payload=payload,
                               signer=write_records.signer(svc, caller))
    await _note(conn, event.sequence, payload)


async def _note(conn: Conn, sequence: int, payload: dict[str, CborValue]) -> None:
    """Note the op record at ``sequence`` as the latest of every row it names (migration
    0037), in its transaction."""
    await row_records.note(conn, [(kind, key_of(kind, record), sequence)
                                  for kind, record in recorded_rows(payload) or ()])


async def require_recorded(conn: Conn, kind: SpokeKind, row: Row) -> None:
    """Refuse (409 ``row_unrecorded``, the caller's transaction rolls back) unless ``row``,
    as an op read it before changing it, is what its latest op record left (issue 37 item
    12's class, ADR 0087 section 9): a row without one must hold the defaults of its kind
    (a space or subject made on first use). Called by every op that re-records a row it
    did not write in full, before it changes it, so a column changed behind the server is
    never carried into a new op record with a good MAC; the op refuses exactly when the
    deep audit names the row. The latest record is found through migration 0037's table
    and believed only when the key vouches for it (on a sealed chain)."""
    expected = BUILDERS[kind](row)
    key = key_of(kind, expected)
    sequence = await row_records.latest(conn, kind, key)
    if sequence is None:
        if kind in DEFAULTS and not differing({**expected, **DEFAULTS[kind]}, expected):
            return
        fields: list[str] | None = None
    else:
        fields = differing_from(kind, key, expected,
                                 await events.vouched_payload(conn, sequence))
        if fields == []:
            return
    found = ("has no audit record the key vouches for" if fields is None
             else "is not what its latest audit record left")
    raise ConflictError(
        f"the {kind} {key} {found} (changed behind the server; the deep audit names it); "
        "nothing was written", code="row_unrecorded", kind=kind, id=key, fields=fields or [])


def differing_from(kind: SpokeKind, key: str, expected: dict[str, CborValue],
                    payload: bytes | None) -> list[str] | None:
    """The fields in which ``expected`` differs from the record of the row in the op record
    ``payload``; None when there is no such record (or the key does not vouch for it)."""
    try:
        found = [] if payload is None else recorded_rows(decode(payload)) or []
    except InvalidInputError:
        found = []
    for each_kind, record in found:
        if each_kind == kind and key_of(kind, record) == key:
            return differing(expected, record)
    return None


async def index_rows(db: Database) -> int:
    """Fill migration 0037's table from the chain when it is empty (the first start after
    the upgrade): the latest op record of each row. How many rows it noted (none on a
    schema before 0037: the next start after the migration fills it)."""
    async with db.transaction() as conn:
        if not await row_records.present(conn) or not await row_records.empty(conn):
            return 0
        return await spoke_index.rebuild(conn)


async def _records(conn: Conn, receipt: Row) -> list[Row]:
    """The record side rows the op wrote: those its refs name (an activation: every record
    of the space, which it filled from empty)."""
    if receipt["op"] == "memory.imports.activate":
        return await rows.record_rows(conn, receipt["space_id"])
    ids = []
    for ref in receipt["refs"]:
        try:
            ids.append(uuid.UUID(str(ref)))
        except ValueError:  # a subject id, a profile kind: not a record
            continue
    return await rows.record_rows(conn, receipt["space_id"], ids) if ids else []


async def adopt_records(db: Database, signer: AgentKey | None) -> int:
    """Cover the record rows written before op records covered them (migration 0032's
    list, ADR 0087), once: one ``spoke.memory.records.adopt`` record per space, in the
    transaction that empties the list; a row some record already covers is left as it is
    (the deep audit compares it with that record). How many rows it covered."""
    async with db.transaction() as conn:
        listed = await rows.take_to_adopt(conn)
        if not listed:
            return 0
        covered = await _covered_records(conn)
        by_space: dict[str, list[dict[str, CborValue]]] = {}
        for row in listed:
            if str(row["memory_id"]) not in covered:
                by_space.setdefault(row["space_id"], []).append(record_record(row))
        agent = signer.agent_id if signer is not None else ADOPTER
        for space_id, records in sorted(by_space.items()):
            payload = adopt_record(agent, space_id, records)
            event = await record_event(conn, agent_id=agent, event_type=event_type(ADOPT_OP),
                                       payload=payload, signer=signer)
            await _note(conn, event.sequence, payload)
    return sum(len(r) for r in by_space.values())


async def candidate_recorded(conn: Conn, row: Row) -> bool:
    """Whether a candidate row is what its capture record left (issue 37 item 12's class,
    ADR 0087): the first ``spoke.memory.capture`` record of its capturer since it was made
    that names it, vouched for by the key on a sealed chain, holds the same capture (subject,
    scope, classification, the proposed content's digest) and review state. Review writes
    a candidate's content and scope into records with a good MAC; an edited proposal must
    not be promoted and signed into the chain."""
    key = str(row["candidate_id"])
    async for payload in events.recorded_since(
            conn, agent_id=row["captured_by"], event_type=event_type("memory.capture"),
            since=row["created_at"]):
        try:
            found = recorded_rows(decode(payload)) or []
        except InvalidInputError:
            continue
        for kind, record in found:
            if kind == "candidate" and key_of(kind, record) == key:
                return not differing(candidate_record(row), record)
    return False


async def _covered_records(conn: Conn) -> set[str]:
    """The ids of the record rows some op record already names."""
    covered: set[str] = set()
    async for _, _, payload in scanning.prefixed_records(conn, EVENT_PREFIX):
        try:
            found = recorded_rows(decode(payload)) or []
        except InvalidInputError:
            continue
        covered.update(key_of(kind, record) for kind, record in found if kind == "record")
    return covered


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
