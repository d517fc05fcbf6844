"""JSON merge patch (RFC 7386): the delta format of a hook's Modify decision.

The chain (:mod:`.chaining`) applies each Modify delta to the event payload in order.
Rules: a key with ``null`` removes that key; an object merges recursively; any other value
(string, number, list, ...) replaces. Pure and non-mutating: the input is never changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``target`` with the object ``patch`` applied (RFC 7386, section 2)."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            current = result.get(key)
            base = current if isinstance(current, Mapping) else {}
            result[key] = merge_patch(base, value)
        else:
            result[key] = value
    return result
