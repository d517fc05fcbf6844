"""Byte bounds on answers that list stored text (recall, ``GET /v1/memories``): ADR 0020.

A memory may hold 256k characters, and JSON spells an emoji as a 12-byte escape, so 25
memories were one 72 MiB recall answer and four concurrent listings of 500 took 1 GiB of
memory. An answer now holds leading items while their JSON fits ``Limits.max_answer_bytes``
together (always the first, so paging always moves on), and says it was cut. Pure; called by
:mod:`.recall` and :mod:`.memories`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: Room kept for the envelope around the items (``truncated``, ``next``, ``mode``...).
ENVELOPE_BYTES = 4096


def json_bytes(value: Any) -> int:
    """The size of ``value`` as the server encodes it (``json.dumps`` defaults, ASCII)."""
    return len(json.dumps(value))


def fitting(items: Sequence[T], view: Callable[[T], dict[str, Any]], *,
            max_bytes: int) -> list[dict[str, Any]]:
    """The views of the leading ``items`` whose JSON fits ``max_bytes`` together; the first
    always (a single item is bounded by the content limits), so a page is never empty."""
    room = max(max_bytes - ENVELOPE_BYTES, 0)
    kept: list[dict[str, Any]] = []
    used = 0
    for item in items:
        shown = view(item)
        size = json_bytes(shown) + 2  # the ", " between items
        if kept and used + size > room:
            break
        kept.append(shown)
        used += size
    return kept
