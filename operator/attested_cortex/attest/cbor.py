"""Deterministic CBOR (RFC 8949 §4.2.1, core deterministic encoding) for signed payloads.

Pure and synchronous. Called by :mod:`attested_cortex.attest.payloads` (link payloads) and
:mod:`attested_cortex.attest.chain` (audit-chain hash input); nothing else should invent bytes
that get signed or hashed.

The accepted type set is deliberately small, so every value has exactly one encoding:

==========================  ==========================================================
Python value                CBOR
==========================  ==========================================================
``None``                    simple value 22 (``f6``)
``False`` / ``True``        simple values 20 / 21 (``f4`` / ``f5``)
``int`` in [-2**64, 2**64)  major type 0 or 1, shortest argument form
``bytes``                   major type 2, definite length
``str``                     major type 3 (UTF-8), definite length
``list`` / ``tuple``        major type 4, definite length
``Mapping[str, ...]``       major type 5, keys sorted by the bytewise order of their
                            encodings, duplicates impossible
==========================  ==========================================================

Floats, tags, bignums, undefined and non-text map keys are refused with
:class:`~attested_cortex.errors.InvalidInputError`: a signer and a verifier must never have
to agree on how a float was rounded.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from attested_cortex.errors import InvalidInputError

CborValue: TypeAlias = (
    "bool | int | str | bytes | Sequence[CborValue] | Mapping[str, CborValue] | None"
)

_UINT64_LIMIT = 1 << 64
_SIMPLE = {None: b"\xf6", False: b"\xf4", True: b"\xf5"}


def encode(value: CborValue) -> bytes:
    """Return the one deterministic CBOR encoding of ``value``."""
    out = bytearray()
    _encode_into(out, value)
    return bytes(out)


def head(major: int, argument: int) -> bytes:
    """Encode a data item head: major type plus its argument in the shortest form."""
    if argument < 0x100:
        return _SMALL_HEADS[major][argument]
    return _head(major, argument)


def _head(major: int, argument: int) -> bytes:
    initial = major << 5
    if argument < 24:
        return bytes((initial | argument,))
    if argument < 0x100:
        return bytes((initial | 24, argument))
    if argument < 0x10000:
        return bytes((initial | 25,)) + argument.to_bytes(2, "big")
    if argument < 0x1_0000_0000:
        return bytes((initial | 26,)) + argument.to_bytes(4, "big")
    if argument < _UINT64_LIMIT:
        return bytes((initial | 27,)) + argument.to_bytes(8, "big")
    raise InvalidInputError("integer does not fit in 64 bits", code="cbor_unsupported")


#: The heads of every major type with an argument below 256 (most texts, byte strings,
#: arrays and maps): a lookup instead of building bytes each time (docs/adr/0075).
_SMALL_HEADS = tuple(tuple(_head(major, argument) for argument in range(0x100))
                     for major in range(8))


def text(value: str) -> bytes:
    """Encode one text string (major type 3)."""
    raw = value.encode("utf-8")
    return head(3, len(raw)) + raw


@functools.lru_cache(maxsize=1024)
def _key(value: str) -> bytes:
    # Map keys repeat across payloads: encode each one once.
    return text(value)


def _encode_into(out: bytearray, value: CborValue) -> None:
    kind = type(value)
    if kind is str:
        raw = value.encode("utf-8")  # type: ignore[union-attr]
        out += head(3, len(raw))
        out += raw
    elif kind is int:
        out += _encode_int(value)  # type: ignore[arg-type]
    elif value is None or kind is bool:
        out += _SIMPLE[value]  # type: ignore[index]
    elif kind is bytes:
        out += head(2, len(value)) + value  # type: ignore[arg-type,operator]
    elif isinstance(value, str | int | bytes):
        _encode_into(out, _plain(value))
    elif isinstance(value, Mapping):
        _encode_map(out, value)
    elif isinstance(value, list | tuple):
        out += head(4, len(value))
        for item in value:
            _encode_into(out, item)
    else:
        raise InvalidInputError(
            f"type {type(value).__name__} is not part of the signed payload type set",
            code="cbor_unsupported",
        )


#: The key order of maps with these keys, in this order (records repeat a few shapes):
#: each key's encoding and the key, sorted once, not at every map. Plain ``str`` keys only
#: (a subclass's ``str()`` may differ from its value).
_ORDERS: dict[tuple[str, ...], tuple[tuple[bytes, str], ...]] = {}
_MAX_ORDERS = 1024


def _encode_int(value: int) -> bytes:
    if not -_UINT64_LIMIT <= value < _UINT64_LIMIT:
        raise InvalidInputError("integer does not fit in 64 bits", code="cbor_unsupported")
    return head(0, value) if value >= 0 else head(1, -1 - value)


def _encode_map(out: bytearray, value: Mapping[str, CborValue]) -> None:
    keys = tuple(value)
    order = _ORDERS.get(keys)
    if order is not None and all(type(key) is str for key in keys):
        out += head(5, len(order))
        for encoded_key, key in order:
            out += encoded_key
            _encode_into(out, value[key])
        return
    if keys and len(_ORDERS) < _MAX_ORDERS and all(type(key) is str for key in keys):
        _ORDERS[keys] = tuple(sorted((_key(key), key) for key in keys))
    entries: list[tuple[bytes, CborValue]] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidInputError("map keys must be text strings", code="cbor_unsupported")
        entries.append((_key(str(key)), item))
    entries.sort(key=lambda entry: entry[0])
    out += head(5, len(entries))
    for encoded_key, item in entries:
        out += encoded_key
        _encode_into(out, item)


def _plain(value: str | int | bytes) -> CborValue:
    """The base-type value of a subclass instance (an IntEnum or StrEnum member, say)."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str.__str__(value)
    return bytes(value)
