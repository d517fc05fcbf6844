"""PostgreSQL's binary COPY format, for the rows of a sealed batch (issue 27, ADR 0065).

A sealed memory row is mostly bytes PostgreSQL would otherwise parse from text: its sealed
value (hex in a text COPY, twice its size, decoded again) and its keyed search vector (838
characters a bench memory, read by ``tsvectorin``'s parser and sorted). In the binary form
the sealed value is its bytes and the vector ``tsvectorrecv``'s wire form
(:meth:`attested_cortex.attest.blinding.Blinder.key_binary`), which PostgreSQL copies and
sorts without parsing. psycopg writes a binary COPY row by row through one dumper per value
(its array dumper in Python); these encoders build each field from bytes at hand, and a
batch is written as one buffer (``Copy.write``: the signature and trailer are ours).

The format is PostgreSQL's (the "Binary Format" of its COPY documentation): a signature,
32-bit flags and header-extension length, then per row a 16-bit field count and each field
as a 32-bit length (-1: NULL) and its ``typsend`` bytes; a 16-bit -1 ends the data.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final

#: The start of a binary COPY: signature, flags (none), header extension (none).
HEADER: Final = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
#: The end of a binary COPY's data.
TRAILER: Final = b"\xff\xff"
#: A NULL field.
NULL: Final = b"\xff\xff\xff\xff"
_LENGTH = struct.Struct(">i").pack
_TEXT_OID: Final = 25  # text (pg_type), the element type of a text[]
_EMPTY_TEXT_ARRAY: Final = struct.pack(">iiI", 0, 0, _TEXT_OID)


def field(value: bytes) -> bytes:
    """A non-NULL field: its length and its bytes."""
    return _LENGTH(len(value)) + value


def text(value: str) -> bytes:
    """A ``text`` field, UTF-8 (the connection's client encoding: the caller checks it)."""
    return field(value.encode("utf-8"))


def int4(value: int) -> bytes:
    """An ``integer`` field."""
    return b"\x00\x00\x00\x04" + value.to_bytes(4, "big", signed=True)


def uuid_(value: uuid.UUID) -> bytes:
    """A ``uuid`` field."""
    return b"\x00\x00\x00\x10" + value.bytes


def jsonb(json_text: str) -> bytes:
    """A ``jsonb`` field from its JSON text (``jsonb_recv``: version 1, then the text)."""
    return field(b"\x01" + json_text.encode("utf-8"))


def text_array(values: Sequence[str]) -> bytes:
    """A ``text[]`` field (``array_send``: dimensions, no NULLs, element type, then each
    element as a length and its bytes); empty: no dimension."""
    if not values:
        return field(_EMPTY_TEXT_ARRAY)
    encoded = [v.encode("utf-8") for v in values]
    return field(b"".join([struct.pack(">iiIii", 1, 0, _TEXT_OID, len(encoded), 1),
                           *(_LENGTH(len(e)) + e for e in encoded)]))


def row(count: int, fields: Sequence[bytes]) -> bytes:
    """One row of ``count`` fields, already encoded (``fields`` may join several)."""
    return count.to_bytes(2, "big") + b"".join(fields)
