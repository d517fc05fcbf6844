"""What the operator-run witnesses' status ConfigMaps say, as ``status.audit.witnesses`` and
the ``AuditWitnessed`` condition (ADR 0102). Pure.

Each witness serves ``cosignedSize``, ``cosignedRoot``, ``cosignedAt`` and ``lastError``
(``cli/witness_reports.py``); a witness whose report cannot be read (its pod restarting)
keeps the item the status already shows. The condition is decided by a chain, first match wins: a
witness that refused (its last round named a truncated, forked or rewritten history) is
``False``/``WitnessRefused`` naming it and its words (a Warning event: someone must look at
the database); a witness that has not cosigned yet, or whose last round could not run, is
``Unknown``/``WitnessPending`` (a Normal event: a witness starting, or the server rolling);
otherwise ``True``/``Witnessed`` with each witness's size. Not part of ``Ready``: a cortex
whose witness refuses keeps serving; the refusal is what the witness is for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attested_cortex.builders.conditions import Observation

Object = dict[str, Any]
CONDITION: Final = "AuditWitnessed"
REFUSED: Final = "WitnessRefused"
PENDING: Final = "WitnessPending"


def entry(name: str, report: Mapping[str, Any] | None,
          previous: Mapping[str, Any] | None = None) -> Object:
    """One witness's ``status.audit.witnesses`` item from its report (None: unread, the
    ``previous`` item stands)."""
    if report is None:
        return dict(previous) if previous else {"name": name}
    out: Object = {"name": name}
    size = report.get("cosignedSize")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        out["cosignedSize"] = size
        if isinstance(report.get("cosignedAt"), str):
            out["cosignedAt"] = report["cosignedAt"][:64]
    if isinstance(report.get("lastError"), str) and report["lastError"]:
        out["lastError"] = report["lastError"][:1024]
    return out


def previous_items(status: Mapping[str, Any]) -> dict[str, Object]:
    """The items ``status.audit.witnesses`` shows now, by name."""
    items = (status.get("audit") or {}).get("witnesses") or []
    return {str(i.get("name")): dict(i) for i in items if isinstance(i, Mapping)}


def _refused(item: Object) -> bool:
    return str(item.get("lastError", "")).startswith("refused")


def condition(items: Sequence[Object]) -> Observation:
    """``AuditWitnessed`` over every operator-run witness's item."""
    refused = [i for i in items if _refused(i)]
    if refused:
        return Observation.of(CONDITION, False, REFUSED, "; ".join(
            f"witness {i['name']} {i['lastError']}" for i in refused)[:1024])
    pending = [i for i in items if "cosignedSize" not in i or i.get("lastError")]
    if pending:
        return Observation(CONDITION, "Unknown", PENDING, "; ".join(
            f"witness {i['name']}: " + (str(i.get("lastError")) if i.get("lastError")
                                        else "no checkpoint cosigned yet")
            for i in pending)[:1024])
    return Observation.of(CONDITION, True, "Witnessed", "; ".join(
        f"witness {i['name']} cosigned size {i['cosignedSize']}" for i in items)[:1024])
