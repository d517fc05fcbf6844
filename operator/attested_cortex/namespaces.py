"""Memory namespaces: ``/``-separated paths, validated and related to each other.

A namespace is at most 512 characters and 8 levels. Each segment is 1..64 characters of
``A-Z a-z 0-9 _ - . : @``, and never empty, ``.`` or ``..``. Pure functions; the service
layer, the policy rules and the recall ranking all use them.
"""

from __future__ import annotations

import re

from attested_cortex.errors import InvalidInputError
from attested_cortex.types import Namespace

MAX_LENGTH = 512
MAX_LEVELS = 8
_SEGMENT = re.compile(r"[A-Za-z0-9_\-.:@]{1,64}")
#: The shape as a JSON-schema ``pattern`` for API documents (``.`` and ``..`` segments, and
#: the 512-character bound, are checked by :func:`namespace_problem` only).
PATTERN = r"^[A-Za-z0-9_\-.:@]{1,64}(/[A-Za-z0-9_\-.:@]{1,64}){0,7}$"


def namespace_problem(value: str) -> str | None:
    """Why ``value`` is not a valid namespace, or None when it is."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters"
    segments = value.split("/")
    if len(segments) > MAX_LEVELS:
        return f"must have at most {MAX_LEVELS} levels"
    for segment in segments:
        if segment in ("", ".", ".."):
            return "must not contain empty, '.' or '..' segments"
        if not _SEGMENT.fullmatch(segment):
            return (
                f"segment {segment[:70]!r} must be 1..64 characters of letters, digits "
                "and _ - . : @"
            )
    return None


def parse_namespace(value: str, *, field: str = "namespace") -> Namespace:
    """``value`` as a :data:`Namespace`, or :class:`InvalidInputError` naming ``field``."""
    problem = namespace_problem(value)
    if problem is not None:
        raise InvalidInputError(f"{field} {problem}", field=field)
    return Namespace(value)


def ancestors(namespace: str) -> list[str]:
    """The namespace and its ancestors, nearest first: ``a/b/c`` -> ``[a/b/c, a/b, a]``."""
    parts = namespace.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


def depth(namespace: str) -> int:
    """Number of levels: ``a/b/c`` -> 3."""
    return namespace.count("/") + 1
