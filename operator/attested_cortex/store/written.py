"""Who wrote a row: the trust tier and effective scopes of the request (migration 0021).

Passed by the service layer to every memory, link and transcript write
(``service/pipeline/write_records.written_by``), kept in the row's ``written_tier`` and
``written_scopes`` columns and in its write record, so the deep audit checks them like every
other recorded field (ADR 0066).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

#: The columns, in the order every ``RETURNING`` and ``SELECT`` of the three tables reads.
COLUMNS: Final = "written_tier, written_scopes"


@dataclass(frozen=True, slots=True)
class WrittenBy:
    """The tier and the effective scopes (sorted) of the request writing a row."""

    tier: str
    scopes: tuple[str, ...]

    def params(self) -> tuple[str, list[str]]:
        """The two column values."""
        return self.tier, list(self.scopes)


def params(by: WrittenBy | None) -> tuple[str | None, list[str] | None]:
    """The column values of ``by`` (NULLs without a request)."""
    return (None, None) if by is None else by.params()


def scopes_of(value: Sequence[str] | None) -> tuple[str, ...] | None:
    """``written_scopes`` as read (a list, or NULL) as the dataclasses hold it."""
    return None if value is None else tuple(value)


def fields(row: dict[str, Any]) -> dict[str, Any]:
    """The two dataclass fields of a row read with :data:`COLUMNS` (None where a query
    left them out, as recall does: nothing rebuilds a record from such a row)."""
    return {"written_tier": row.get("written_tier"),
            "written_scopes": scopes_of(row.get("written_scopes"))}
