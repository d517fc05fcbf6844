"""Rows of the spoke-memory tables as wire models (:mod:`attested_cortex.spoke.models`).
Pure but for a log line; called by :mod:`.ops`, :mod:`.reading`,
:mod:`.profiles` and :mod:`.receipts`.

A stored row the wire model refuses (written before imports were validated, or changed
behind the server) never makes a read answer 500 (ADR 0084): a listing or recall leaves it
out and logs it (:func:`rendered`), a read of that one row answers 409
``stored_row_invalid`` naming it (:func:`rendered_one`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from attested_cortex.errors import ConflictError
from attested_cortex.spoke.models import (
    Content,
    MemoryGrant,
    MemoryReceipt,
    MemorySpace,
    Placement,
    Provenance,
    RetainedRecord,
    Subject,
)

Row = dict[str, Any]
M = TypeVar("M", bound=BaseModel)
_DURABLE = ("schema_version", "extensions")
log = logging.getLogger(__name__)


def rendered(rows: Iterable[Row], view: Callable[[Row], M], *, key: str) -> list[M]:
    """Each row's wire model; a row the model refuses is skipped and logged by its id
    (``row[key]``) and the fields refused, never its content."""
    found = []
    for row in rows:
        try:
            found.append(view(row))
        except ValidationError as exc:
            log.warning("stored %s %s does not fit its wire model (%s): left out of the "
                        "answer", key, row.get(key), _fields(exc))
    return found


def rendered_one(row: Row, view: Callable[[Row], M], *, key: str) -> M:
    """The row's wire model, or 409 ``stored_row_invalid`` naming it and the fields."""
    try:
        return view(row)
    except ValidationError as exc:
        log.warning("stored %s %s does not fit its wire model (%s)", key, row.get(key),
                    _fields(exc))
        raise ConflictError(f"the stored {key} {row.get(key)} does not fit its wire model "
                            f"({_fields(exc)}): the space authority can delete it",
                            code="stored_row_invalid", fields=_fields(exc)) from exc


def _fields(exc: ValidationError) -> str:
    return ", ".join(sorted({".".join(str(p) for p in e["loc"]) or "row"
                             for e in exc.errors(include_url=False, include_input=False)}))


def space_view(row: Row) -> MemorySpace:
    return MemorySpace(**{k: row[k] for k in (
        "space_id", "provider", "revision", "frozen", "authority_generation",
        "pending_receipts", "created_at", *_DURABLE)})


def subject_view(row: Row) -> Subject:
    return Subject(**{k: row[k] for k in (
        "space_id", "subject_id", "kind", "state", "revision", "created_at", *_DURABLE)},
        fenced_context_ids=list(row["fenced_context_ids"]))


def grant_view(row: Row) -> MemoryGrant:
    return MemoryGrant(**{k: row[k] for k in (
        "grant_id", "space_id", "principal_id", "issued_by", "capabilities", "subject_ids",
        "context_ids", "shared_access", "expires_at", "revoked_at", "created_at", *_DURABLE)})


def content_of(row: Row) -> Content:
    """A record's content: absent members stay absent; a tombstone is ``{"text": ""}``."""
    present: dict[str, Any] = {"text": row["text"]}
    if row["deleted_at"] is None:
        for name in ("structured", "cognition"):
            if row[name] is not None:
                present[name] = row[name]
    return Content(**present)


def record_view(row: Row) -> RetainedRecord:
    context = row["context_id"]
    return RetainedRecord(
        record_id=row["memory_id"], space_id=row["space_id"], subject_id=row["subject_id"],
        kind=row["kind"], content=content_of(row),
        placement=Placement(shared=True) if context is None else Placement(context_id=context),
        provenance=Provenance(source_context_id=row["source_context_id"],
                              captured_by=row["captured_by"], candidate_id=row["candidate_id"]),
        revision=row["revision"], tombstone=row["deleted_at"] is not None,
        created_at=row["created_at"], updated_at=row["updated_at"],
        schema_version=row["schema_version"], extensions=row["extensions"])


def receipt_view(row: Row) -> MemoryReceipt:
    return MemoryReceipt(
        receipt_id=row["receipt_id"], space_id=row["space_id"], op=row["op"],
        status=row["status"], idempotency_key=row["idempotency_key"],
        request_digest=bytes(row["request_sha256"]).hex(), refs=list(row["refs"]),
        revision=row["revision"], error_code=row["error_code"], created_at=row["created_at"],
        completed_at=row["completed_at"], schema_version=row["schema_version"],
        extensions=row["extensions"])


def wire(model: Any) -> dict[str, Any]:
    """A wire model as JSON; a record's content keeps absent members absent."""
    if isinstance(model, RetainedRecord):
        found: dict[str, Any] = model.model_dump(mode="json")
        found["content"] = model.content.wire()
    else:
        found = model.model_dump(mode="json")
    if found.get("receipts", False) is None:  # receipts (ADR 0104) appear only when asked
        del found["receipts"]
    return found
