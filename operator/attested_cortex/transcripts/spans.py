"""Citation spans: which characters of a transcript a memory came from.

A span is ``[start, end)`` in Unicode code points of the transcript text (what a client
slicing the replayed text gets). Pure: :func:`check_spans` refuses empty, reversed,
out-of-range and overlapping spans with a 400 naming the citation; :func:`cut` returns the
text of a span. Called by :mod:`attested_cortex.service.resources.transcripts`.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attested_cortex.errors import InvalidInputError


@dataclass(frozen=True)
class Span:
    """One cited span of one transcript."""

    transcript_id: uuid.UUID
    start: int
    end: int


def check_spans(spans: Sequence[Span], lengths: Mapping[uuid.UUID, int]) -> None:
    """Every span non-empty, within its transcript (``lengths``: characters), and no two
    spans of one transcript overlapping (one memory cites each character once)."""
    for index, span in enumerate(spans):
        field = f"citations[{index}]"
        if span.start >= span.end:
            raise InvalidInputError(f"{field}: start {span.start} must be below end {span.end}",
                                    field=field, code="bad_span")
        length = lengths[span.transcript_id]
        if span.end > length:
            raise InvalidInputError(
                f"{field}: end {span.end} is past the transcript's {length} characters",
                field=field, code="bad_span", length=length)
    by_transcript = sorted(enumerate(spans), key=lambda p: (str(p[1].transcript_id),
                                                            p[1].start))
    for (_, a), (index, b) in itertools.pairwise(by_transcript):
        if a.transcript_id == b.transcript_id and b.start < a.end:
            raise InvalidInputError(
                f"citations[{index}]: span {b.start}..{b.end} overlaps span {a.start}..{a.end} "
                "of the same transcript; merge them into one", field=f"citations[{index}]",
                code="overlapping_spans")


def cut(text: str, span: Span) -> str:
    """The cited characters (spans were checked against this text's length)."""
    return text[span.start:span.end]
