"""Who wrote a row: the trust tier and effective scopes of the request (migration 0021),
and the Allow decisions that let it through (migration 0040, ADR 0124).

Passed by the service layer to every memory, link and transcript write
(``service/pipeline/write_records.written_by``), kept in the row's ``written_tier``,
``written_scopes`` and ``written_allowed`` columns and in its write record, so the deep audit
checks them like every other recorded field (ADR 0066, 0124).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

#: The columns, in the order every ``RETURNING`` and ``SELECT`` of the three tables reads.
COLUMNS: Final = "written_tier, written_scopes, written_allowed"


@dataclass(frozen=True, slots=True)
class WrittenBy:
    """The tier and the effective scopes (sorted) of the request writing a row, and its
    Allow summary (``allow:rule:<source>``..., or ``allow:default`` when no rule decided;
    None when the write ran outside the pipeline's rule step)."""

    tier: str
    scopes: tuple[str, ...]
    allowed: tuple[str, ...] | None = None

    def params(self) -> tuple[str, list[str], list[str] | None]:
        """The three column values."""
        return (self.tier, list(self.scopes),
                None if self.allowed is None else list(self.allowed))


def params(by: WrittenBy | None) -> tuple[str | None, list[str] | None, list[str] | None]:
    """The column values of ``by`` (NULLs without a request)."""
    return (None, None, None) if by is None else by.params()


def scopes_of(value: Sequence[str] | None) -> tuple[str, ...] | None:
    """``written_scopes`` as read (a list, or NULL) as the dataclasses hold it."""
    return None if value is None else tuple(value)


def fields(row: dict[str, Any]) -> dict[str, Any]:
    """The three dataclass fields of a row read with :data:`COLUMNS` (None where a query
    left them out, as recall does: nothing rebuilds a record from such a row)."""
    return {"written_tier": row.get("written_tier"),
            "written_scopes": scopes_of(row.get("written_scopes")),
            "written_allowed": scopes_of(row.get("written_allowed"))}
