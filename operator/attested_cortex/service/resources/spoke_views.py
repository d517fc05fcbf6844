"""Rows of the spoke-memory tables as wire models (:mod:`attested_cortex.spoke.models`).
Pure; called by :mod:`.spoke_ops` and :mod:`.spoke_receipts`."""

from __future__ import annotations

from typing import Any

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
_DURABLE = ("schema_version", "extensions")


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
        return found
    dumped: dict[str, Any] = model.model_dump(mode="json")
    return dumped
