"""PostgreSQL COPY text rows read back into values: the rows of the chain and of keys a bundle
must verify before anything is imported. Pure.

COPY's text format: one row per line, fields separated by a tab, ``\\N`` for NULL, and
backslash escapes inside a field (``\\\\``, ``\\t``, ``\\n``, ``\\r`` and the rest, octal and
``\\x`` hex bytes). A bytea field arrives (after unescaping) as ``\\x`` and hex digits because
both ends run with ``bytea_output = hex`` (:data:`~.formats.COPY_SETTINGS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from attested_cortex.store.events import EventRow

_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)")


def rows(data: bytes) -> Iterator[list[str | None]]:
    """Each row of a chunk as its fields, unescaped (None for NULL)."""
    for fields in raw_rows(data):
        yield [None if f is None else _unescape(f) for f in fields]


def raw_rows(data: bytes) -> Iterator[list[str | None]]:
    """Each row of a chunk as its fields still escaped (None for NULL): the chain's rows are
    mostly hex bytea, decoded straight from the escaped form by :func:`event`."""
    for line in data.decode("utf-8").split("\n"):
        if line:
            yield [None if f == "\\N" else f for f in line.split("\t")]


def _unescape(field: str) -> str:
    if "\\" not in field:
        return field
    return _ESCAPE.sub(_one, field)


def _one(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] == "x" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _ESCAPES.get(code, code)


def bytea(field: str | None) -> bytes | None:
    """A hex-format bytea field as COPY writes it (the backslash of ``\\x`` doubled)."""
    if field is None:
        return None
    if not field.startswith("\\\\x"):
        raise ValueError("bytea field is not in hex format")
    return bytes.fromhex(field[3:])


def timestamp(field: str) -> datetime:
    """A timestamptz field written under ``TimeZone = UTC`` and ISO dates."""
    return datetime.fromisoformat(field)


def event(fields: list[str | None]) -> EventRow:
    """A ``signed_events`` row (from :func:`raw_rows`) in :data:`~.formats.EVENTS` order."""
    seq, agent, kind, payload, payload_hash, signature, fingerprint, prev, hash_, at = fields
    if None in (seq, agent, kind, payload, payload_hash, prev, hash_, at):
        raise ValueError("a required field of an event is NULL")
    return EventRow(
        sequence=int(seq or 0), agent_id=_unescape(agent or ""),
        event_type=_unescape(kind or ""),
        payload=bytea(payload) or b"", payload_hash=bytea(payload_hash) or b"",
        signature=bytea(signature),
        key_fingerprint=None if fingerprint is None else _unescape(fingerprint),
        prev_hash=bytea(prev) or b"", hash=bytea(hash_) or b"", created_at=timestamp(at or ""),
    )
