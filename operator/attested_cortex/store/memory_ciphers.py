"""What seals and opens memory rows on a connection (issue 27 part 3, ADR 0056 item 5, ADR 0065).

The store holds no key: the server builds a :class:`MemoryCipher`
(:class:`attested_cortex.attest.memory_sealing.MemorySeal`) from its master key ring and
:meth:`.database.Database.open` binds it to every pooled connection, as it binds the keyed
chain's seal (:func:`.events.bind_seal`). :mod:`.memories` then writes a sealed row when the
cipher ``seals`` and opens every sealed row it reads; :mod:`.recall` keys its queries.

A sealed row keeps title ``''``, content ``''`` and metadata ``{}``; ``sealed`` holds the
three as one JSON value sealed under ``key_version``, and ``search`` the keyed blind tokens
of the lexemes PostgreSQL computes for them in a SELECT of their own (:func:`lexemes`, or
:func:`vectors` for a batch's binary COPY: it writes nothing, so the text reaches no page
and no WAL record; the INSERT carries tokens only). A row that does not open (altered,
moved, its version missing from the ring) reads with empty text and ``unreadable`` set, as
a transcript's frame reads ``unreadable``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import psycopg


class MemoryCipher(Protocol):
    """Seals and opens memory values; keys lexemes into blind tokens (per key version)."""

    @property
    def seals(self) -> bool:
        """Whether new rows are sealed (``encryption.at_rest`` on)."""
        ...

    @property
    def version(self) -> int:
        """The master key version new rows are sealed and keyed under."""
        ...

    @property
    def versions(self) -> tuple[int, ...]:
        """Every version the ring holds, newest first (the token spaces a query covers)."""
        ...

    def seal(self, row_id: uuid.UUID, plain: bytes) -> bytes:
        """``plain`` sealed for ``row_id`` under :attr:`version`."""
        ...

    def open(self, row_id: uuid.UUID, version: int, sealed: bytes) -> bytes | None:
        """The plaintext, or None when the value does not open."""
        ...

    def key_text(self, text: str, version: int) -> str:
        """A tsvector's or tsquery's text form with every lexeme keyed under ``version``."""
        ...

    def token(self, lexeme: str, version: int) -> str:
        """One lexeme's blind token under ``version``."""
        ...

    def key_binary(self, vector: bytes, version: int) -> bytes:
        """A tsvector's binary form with every lexeme keyed under ``version``."""
        ...


_CIPHERS: WeakKeyDictionary[psycopg.AsyncConnection[Any], MemoryCipher] = WeakKeyDictionary()


def bind_cipher(conn: psycopg.AsyncConnection[Any], cipher: MemoryCipher) -> None:
    """Seal and open memory rows on ``conn`` from now on (for the connection's life)."""
    _CIPHERS[conn] = cipher


def cipher_of(conn: psycopg.AsyncConnection[Any]) -> MemoryCipher | None:
    """The cipher bound to ``conn``, if any."""
    return _CIPHERS.get(conn)


def sealing(conn: psycopg.AsyncConnection[Any]) -> MemoryCipher | None:
    """The cipher bound to ``conn`` when it seals new rows (writes and recall key then)."""
    cipher = _CIPHERS.get(conn)
    return cipher if cipher is not None and cipher.seals else None


def seal_value(conn: psycopg.AsyncConnection[Any], value_id: uuid.UUID,
               plain: bytes) -> tuple[bytes, int] | None:
    """``plain`` sealed for ``value_id`` under the current version, with that version; None
    when ``conn`` does not seal (kept plain). For values beside the memory rows that hold a
    memory's text (a kept idempotency answer, a transfer chunk: ADR 0065 item 8)."""
    cipher = sealing(conn)
    return None if cipher is None else (cipher.seal(value_id, plain), cipher.version)


def open_value(conn: psycopg.AsyncConnection[Any], value_id: uuid.UUID, version: int,
               sealed: bytes) -> bytes | None:
    """A value :func:`seal_value` sealed, opened under any version the ring holds; None when
    it does not open (no ring on ``conn``, or its version has left the ring)."""
    cipher = cipher_of(conn)
    return None if cipher is None else cipher.open(value_id, version, sealed)


@dataclass(frozen=True, slots=True)
class Opened:
    """A sealed row's values, opened (or empty and ``unreadable``)."""

    title: str
    content: str
    metadata: dict[str, Any]
    unreadable: bool = False


#: ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))`` made once: ``json.dumps``
#: builds an encoder per call for any argument but the defaults (2 µs a sealed row).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def plaintext(title: str, content: str, metadata: dict[str, Any]) -> bytes:
    """The value a row seals: its title, content and metadata as one compact JSON object."""
    return _COMPACT.encode({"t": title, "c": content, "m": metadata}).encode()


def open_row(cipher: MemoryCipher | None, row: dict[str, Any]) -> Opened:
    """A sealed row's title, content and metadata (the caller checked ``key_version``)."""
    plain = None if cipher is None else cipher.open(
        row["id"], row["key_version"], bytes(row["sealed"]))
    if plain is None:
        return Opened("", "", {}, unreadable=True)
    value = json.loads(plain)
    return Opened(value["t"], value["c"], value["m"])


async def keyed_query(conn: psycopg.AsyncConnection[Any], cipher: MemoryCipher,
                      query: str) -> str:
    """``websearch_to_tsquery`` of ``query`` (PostgreSQL parses it) keyed under every
    version the ring holds and OR'd with the plain form (rows not sealed yet): a tsquery's
    text that matches each row in its own token space ('' when it has no lexeme)."""
    cur = await conn.execute("SELECT websearch_to_tsquery('english'::regconfig, %s)::text AS q",
                             (query,))
    row = await cur.fetchone()
    text = "" if row is None else str(row["q"] if isinstance(row, dict) else row[0])
    return across_spaces(cipher, text)


def across_spaces(cipher: MemoryCipher, text: str) -> str:
    """A tsquery's text keyed under every ring version, OR'd with itself plain."""
    if not text:
        return ""  # no lexeme (stop words only): matches nothing, as the plain form
    return " | ".join(f"( {cipher.key_text(text, v) if v else text} )"
                      for v in [*cipher.versions, 0])


#: A memory's weighted tsvector (the trigger's expression; tags joined by spaces as
#: ``cortex_tags_text`` joins them), as its text form or its binary (wire) form. The
#: arrays go in binary: psycopg quotes and escapes every element of a text-format array in
#: Python (15 ms of 18 for echoing 1,000 memories' texts, issue 27), a binary one is lengths
#: and bytes.
_VECTOR = ("(setweight(to_tsvector('english'::regconfig, t.title), 'A') "
           "|| setweight(to_tsvector('english'::regconfig, t.content), 'B') "
           "|| setweight(to_tsvector('english'::regconfig, t.tags), 'C'))")
_FROM = (" AS search FROM unnest(%b::text[], %b::text[], %b::text[]) "
         "WITH ORDINALITY AS t(title, content, tags, n) ORDER BY t.n")
_LEXEMES = f"SELECT {_VECTOR}::text{_FROM}"
_VECTORS = f"SELECT tsvectorsend{_VECTOR}{_FROM}"


def _texts(rows: Sequence[tuple[str, str, Sequence[str]]]) -> tuple[list[str], ...]:
    return [r[0] for r in rows], [r[1] for r in rows], [" ".join(r[2]) for r in rows]


async def lexemes(conn: psycopg.AsyncConnection[Any],
                  rows: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
    """The tsvector text of each (title, content, tags), computed by PostgreSQL in one
    SELECT (nothing written; the text crosses the connection, never the disk)."""
    cur = await conn.execute(_LEXEMES, _texts(rows))
    return [r[0] if isinstance(r, tuple) else r["search"] for r in await cur.fetchall()]


async def vectors(conn: psycopg.AsyncConnection[Any],
                  rows: Sequence[tuple[str, str, Sequence[str]]]) -> list[bytes]:
    """:func:`lexemes` in the tsvector's binary form (``tsvectorsend``, as bytea: bytes
    whatever loaders psycopg gains), for a binary COPY of keyed vectors."""
    cur = await conn.execute(_VECTORS, _texts(rows), binary=True)
    return [r[0] if isinstance(r, tuple) else r["search"] for r in await cur.fetchall()]
