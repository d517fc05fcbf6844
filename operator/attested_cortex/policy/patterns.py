"""Memory-namespace patterns: ``/``-separated segments, ``*`` one level, ``**`` any depth.

The syntax of ``PermissionRule.spec.namespace`` (checked at admission by the CRD's CEL rules)
and of scope qualifiers (``memory.read:team/*``). Pure: :func:`matches` decides whether a
namespace falls under a pattern, :func:`covers` whether every namespace one pattern admits
is admitted by another (how a delegated scope is proved narrower). Called by
:mod:`.rules` and :mod:`.scopes`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from attested_cortex.errors import InvalidInputError

#: A literal segment: what a memory namespace segment may hold (see ``namespaces.py``).
_LITERAL = re.compile(r"[A-Za-z0-9_\-.:@]{1,64}")
MAX_LEVELS = 8


def parse_pattern(text: str) -> tuple[str, ...]:
    """The segments of ``text``; :class:`InvalidInputError` naming the problem otherwise."""
    segments = tuple(text.split("/"))
    if not text or len(text) > 512 or len(segments) > MAX_LEVELS:
        raise InvalidInputError(f"namespace pattern {text[:80]!r} must be 1..512 characters "
                                f"and at most {MAX_LEVELS} levels", field="namespace")
    for segment in segments:
        if segment in ("*", "**"):
            continue
        if segment in (".", "..") or not _LITERAL.fullmatch(segment):
            raise InvalidInputError(
                f"namespace pattern {text[:80]!r}: segment {segment[:70]!r} must be '*', "
                "'**' or 1..64 characters of letters, digits and _ - . : @", field="namespace")
    return segments


@lru_cache(maxsize=4096)
def covers(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    """Whether every namespace ``inner`` admits is admitted by ``outer``.

    A literal namespace is a pattern without wildcards, so ``covers(p, ns)`` is matching.
    ``**`` in ``outer`` absorbs any run of ``inner`` segments (wildcards included); ``*`` in
    ``outer`` absorbs one literal or ``*``; a wildcard in ``inner`` is only covered by an
    equal or wider wildcard.
    """
    if not outer:
        return not inner
    head, rest = outer[0], outer[1:]
    if head == "**":
        return covers(rest, inner) or (bool(inner) and covers(outer, inner[1:]))
    if not inner or inner[0] == "**":
        return False
    if head == "*" or head == inner[0]:
        return (head == "*" or inner[0] != "*") and covers(rest, inner[1:])
    return False


def whole(pattern: tuple[str, ...]) -> bool:
    """Whether ``pattern`` admits every namespace (``**``, ``*/**``, ``**/**``, ``**/*``...):
    all wildcards, with a ``**`` and at most one ``*`` (a namespace has at least one level).
    A scope qualified by such a pattern narrows nothing: it is bare (issue 37)."""
    return "**" in pattern and set(pattern) <= {"*", "**"} and pattern.count("*") <= 1


def matches(pattern: tuple[str, ...], namespace: str) -> bool:
    """Whether ``namespace`` (a valid memory namespace) falls under ``pattern``."""
    return covers(pattern, tuple(namespace.split("/")))
