"""Decoding of the deterministic CBOR :mod:`.cbor` writes: the same small type set, nothing more.

Pure. Called by :mod:`.sweeping` to read write-record payloads back from the audit chain.
Anything outside the type set (floats, tags, indefinite lengths) or trailing bytes raise
:class:`~attested_cortex.errors.InvalidInputError` with code ``cbor_unsupported``; a record
that does not decode is reported by the sweep, never trusted.
"""

from __future__ import annotations

from attested_cortex.attest.cbor import CborValue
from attested_cortex.errors import InvalidInputError

_SIMPLE: dict[int, CborValue] = {20: False, 21: True, 22: None}


def decode(data: bytes) -> CborValue:
    """The one value encoded in ``data``."""
    value, end = _item(data, 0)
    if end != len(data):
        raise _unsupported("trailing bytes after the value")
    return value


def _item(data: bytes, at: int) -> tuple[CborValue, int]:
    major, argument, at = _head(data, at)
    if major == 0:
        return argument, at
    if major == 1:
        return -1 - argument, at
    if major in (2, 3):
        end = at + argument
        if end > len(data):
            raise _unsupported("a string runs past the end")
        raw = data[at:end]
        try:
            return (raw if major == 2 else raw.decode("utf-8")), end
        except UnicodeDecodeError as exc:
            raise _unsupported("a text string is not UTF-8") from exc
    if major == 4:
        items: list[CborValue] = []
        for _ in range(argument):
            item, at = _item(data, at)
            items.append(item)
        return items, at
    if major == 5:
        entries: dict[str, CborValue] = {}
        for _ in range(argument):
            key, at = _item(data, at)
            if not isinstance(key, str) or key in entries:
                raise _unsupported("map keys must be distinct text strings")
            entries[key], at = _item(data, at)
        return entries, at
    if major == 7 and argument in _SIMPLE:
        return _SIMPLE[argument], at
    raise _unsupported(f"major type {major} is outside the payload type set")


def _head(data: bytes, at: int) -> tuple[int, int, int]:
    if at >= len(data):
        raise _unsupported("the value ends early")
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        return major, info, at
    if info > 27:
        raise _unsupported("indefinite lengths and reserved heads are not used")
    size = 1 << (info - 24)
    if at + size > len(data):
        raise _unsupported("the value ends early")
    return major, int.from_bytes(data[at:at + size], "big"), at + size


def _unsupported(why: str) -> InvalidInputError:
    return InvalidInputError(f"not a payload CBOR value: {why}", code="cbor_unsupported")
