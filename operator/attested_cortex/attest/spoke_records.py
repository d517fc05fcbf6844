"""Op records of the spoke-memory family (ADR 0067): what the audit chain keeps about every
mutating ``memory.*`` op, and what the deep audit rebuilds from the rows. Pure.

Every mutating op appends one ``spoke.<op>`` event (``spoke.memory.grants.grant``) in its own
transaction, after its receipt is settled (:mod:`attested_cortex.service.resources.spoke.audit`):
a deterministic CBOR map naming the op, the acting principal, the space, the receipt (id,
status, refs, revision, request digest) and the ``rows`` it left, each as the record this
module builds from the row. Content never enters a record (receipts are content-free; a
record write's text is covered by its own ``memory.*`` write record).

``cortexctl audit verify --deep`` (:mod:`.sweeping`) rebuilds the record of every row of the
covered tables and compares it with the latest record of that row in the chain:

============  ===========================  ====================================================
kind          row (key)                    covered
============  ===========================  ====================================================
``grant``     memory_grants (grant_id)     every column that decides access; a row without a
                                           record is ``missing_event`` (a grant inserted behind
                                           the server)
``receipt``   memory_receipts (receipt_id) its identity: space, principal, op, key, request
                                           digest (what an idempotent replay answers from)
``space``     memory_spaces (space_id)     ``frozen``; a space never frozen has no record and
                                           must be open
``subject``   memory_subjects (space/id)   ``state`` and ``fenced_context_ids``; without a
                                           record: active, nothing fenced
``candidate`` memory_candidates (id)       its capture (subject, scope, captured_by,
                                           classification, the proposed content's digest) and
                                           review state (state, consumed_by)
``record``    memory_records (memory_id)   every column that decides who reads it or what it
                                           says beside its memory: space, subject, placement
                                           (``context_id``: NULL is shared), provenance, kind,
                                           the structured fields' digest (issue 37 item 13);
                                           its text is its memory's write record's
============  ===========================  ====================================================

Every op names the records it wrote in its refs (``memory.imports.activate`` writes the
whole space: every record of it). Records written before the ``record`` kind existed are
covered once by ``spoke.memory.records.adopt`` records (migration 0032's list, ADR 0087).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from attested_cortex.attest.cbor import CborValue
from attested_cortex.attest.records import json_sha256

RECORD_VERSION: Final = 1
#: The event type of every op record: this prefix and the op's wire name.
EVENT_PREFIX: Final = "spoke."
SpokeKind = Literal["grant", "receipt", "space", "subject", "candidate", "record"]
SPOKE_KINDS: Final[tuple[SpokeKind, ...]] = ("grant", "receipt", "space", "subject",
                                             "candidate", "record")
#: The op of the records that cover record rows written before the ``record`` kind.
ADOPT_OP: Final = "memory.records.adopt"
#: What a space or a subject is before any op recorded it (rows made on first use).
DEFAULTS: Final[dict[SpokeKind, dict[str, CborValue]]] = {
    "space": {"frozen": False},
    "subject": {"state": "active", "fenced_context_ids": []},
}
Row = dict[str, Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def event_type(op: str) -> str:
    """The chain event type of ``op``'s records."""
    return EVENT_PREFIX + op


def _us(moment: datetime | None) -> int | None:
    return None if moment is None else (moment - _EPOCH) // _US


def _texts(values: Any) -> list[CborValue] | None:
    return None if values is None else [str(v) for v in values]


def grant_record(row: Row) -> dict[str, CborValue]:
    """A grant as it decides access."""
    return {"grant_id": str(row["grant_id"]), "space_id": row["space_id"],
            "principal_id": row["principal_id"], "issued_by": row["issued_by"],
            "capabilities": _texts(row["capabilities"]),
            "subject_ids": _texts(row["subject_ids"]),
            "context_ids": _texts(row["context_ids"]), "shared_access": row["shared_access"],
            "expires_at": _us(row["expires_at"]), "revoked_at": _us(row["revoked_at"]),
            # its parent, which revokes it (ADR 0082); absent for a root, as before 0029
            **({} if row.get("derived_from") is None
               else {"derived_from": str(row["derived_from"])})}


def receipt_record(row: Row) -> dict[str, CborValue]:
    """A receipt's identity (its outcome may still change: a pending receipt completes)."""
    return {"receipt_id": str(row["receipt_id"]), "space_id": row["space_id"],
            "principal": row["principal"], "op": row["op"],
            "idempotency_key": row["idempotency_key"],
            "request_sha256": bytes(row["request_sha256"])}


def space_record(row: Row) -> dict[str, CborValue]:
    """Whether the space is frozen."""
    return {"space_id": row["space_id"], "frozen": row["frozen"]}


def subject_record(row: Row) -> dict[str, CborValue]:
    """A subject's fences."""
    return {"space_id": row["space_id"], "subject_id": row["subject_id"],
            "state": row["state"], "fenced_context_ids": _texts(row["fenced_context_ids"])}


def candidate_record(row: Row) -> dict[str, CborValue]:
    """A candidate: its immutable capture (scope, subject, who, the proposed content's
    digest as the database returns it) and its review state."""
    proposed = row["proposed"]
    return {"candidate_id": str(row["candidate_id"]), "space_id": row["space_id"],
            "subject_id": row["subject_id"], "context_id": row["context_id"],
            "captured_by": row["captured_by"], "classification": row["classification"],
            "proposed_sha256": None if proposed is None else json_sha256(proposed),
            "state": row["state"],
            "consumed_by": None if row["consumed_by"] is None else str(row["consumed_by"])}


def record_record(row: Row) -> dict[str, CborValue]:
    """A record's side row: where it is placed (who may read it) and what it is."""
    structured = row["structured"]
    candidate = row["candidate_id"]
    return {"record_id": str(row["memory_id"]), "space_id": row["space_id"],
            "subject_id": row["subject_id"], "context_id": row["context_id"],
            "source_context_id": row["source_context_id"], "kind": row["kind"],
            "captured_by": row["captured_by"],
            "candidate_id": None if candidate is None else str(candidate),
            "structured_sha256": None if structured is None else json_sha256(structured)}


BUILDERS: Final = {"grant": grant_record, "receipt": receipt_record, "space": space_record,
                   "subject": subject_record, "candidate": candidate_record,
                   "record": record_record}


def key_of(kind: SpokeKind, record: dict[str, CborValue]) -> str:
    """The id a deep-audit mismatch names (a subject: ``space_id/subject_id``)."""
    if kind == "subject":
        return "/".join(str(record[name]) for name in ("space_id", "subject_id"))
    return str(record[{"grant": "grant_id", "receipt": "receipt_id", "space": "space_id",
                       "candidate": "candidate_id", "record": "record_id"}[kind]])


def op_record(receipt: Row, rows: dict[SpokeKind, list[dict[str, CborValue]]]
              ) -> dict[str, CborValue]:
    """The record of one op: who did what where, its outcome, and the rows it left."""
    return {"v": RECORD_VERSION, "op": receipt["op"], "principal": receipt["principal"],
            "space_id": receipt["space_id"], "status": receipt["status"],
            "refs": _texts(receipt["refs"]), "revision": receipt["revision"],
            "rows": {"receipt": [receipt_record(receipt)], **rows}}


def adopt_record(principal: str, space_id: str,
                 records: list[dict[str, CborValue]]) -> dict[str, CborValue]:
    """The record covering a space's record rows written before the ``record`` kind."""
    return {"v": RECORD_VERSION, "op": ADOPT_OP, "principal": principal,
            "space_id": space_id, "status": "committed", "refs": [], "revision": None,
            "rows": {"record": records}}


def recorded_rows(record: object) -> list[tuple[SpokeKind, dict[str, CborValue]]] | None:
    """The (kind, record) pairs an op record carries, or None when it is not one."""
    if not isinstance(record, dict) or not isinstance(record.get("rows"), dict):
        return None
    found: list[tuple[SpokeKind, dict[str, CborValue]]] = []
    for kind in SPOKE_KINDS:
        for each in record["rows"].get(kind, []):
            if not isinstance(each, dict):
                return None
            found.append((kind, each))
    return found
