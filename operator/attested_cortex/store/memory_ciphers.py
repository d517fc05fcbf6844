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
import time
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

    def key_text(self, text: str, version: int, *, legacy: bool = False) -> str:
        """A tsvector's or tsquery's text form with every lexeme keyed under ``version``
        (``legacy``: as rows keyed before migration 0027 hold them, ADR 0078)."""
        ...

    def token(self, lexeme: str, version: int, *, legacy: bool = False) -> str:
        """One lexeme's blind token under ``version`` (``legacy``: the legacy form)."""
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
    return across_spaces(cipher, text, legacy=await legacy_tokens(conn))


@dataclass(frozen=True, slots=True)
class Space:
    """One token space: the rows keyed under ``version`` (0: plain rows), in the legacy
    token form or the current one (ADR 0078)."""

    version: int
    legacy: bool = False

    @property
    def name(self) -> str:
        """A name for the space's query parameters."""
        return f"{self.version}{'l' if self.legacy else ''}"

    def guard(self, forms_differ: bool) -> str:
        """The condition a row of the space meets (alias ``m``); ``forms_differ``: both
        token forms are queried, so the row's ``token_format`` decides as well."""
        if not self.version:
            return "m.key_version IS NULL"
        if not forms_differ:
            return f"m.key_version = {self.version:d}"
        return f"m.key_version = {self.version:d} AND m.token_format = {0 if self.legacy else 1}"

    def key(self, cipher: MemoryCipher, text: str) -> str:
        """A tsquery's or tsvector's text form keyed for this space."""
        return cipher.key_text(text, self.version, legacy=self.legacy) if self.version else text

    def token(self, cipher: MemoryCipher, lexeme: str) -> str:
        """One lexeme as this space holds it."""
        return cipher.token(lexeme, self.version, legacy=self.legacy) if self.version else lexeme


def spaces(cipher: MemoryCipher, *, legacy: bool) -> list[Space]:
    """The token spaces a query covers: every ring version (and, ``legacy``, its legacy
    form), then the plain rows."""
    return [*(Space(v) for v in cipher.versions),
            *(Space(v, legacy=True) for v in (cipher.versions if legacy else ())), Space(0)]


def across_spaces(cipher: MemoryCipher, text: str, *, legacy: bool) -> str:
    """A tsquery's text keyed under every ring version (and, ``legacy``, in the legacy
    form too), OR'd with itself plain."""
    if not text:
        return ""  # no lexeme (stop words only): matches nothing, as the plain form
    return " | ".join(f"( {s.key(cipher, text)} )" for s in spaces(cipher, legacy=legacy))


#: How long a connection trusts its last answer to :func:`legacy_tokens` (seconds).
LEGACY_RECHECK_S = 10.0
_LEGACY_CHECKED: WeakKeyDictionary[psycopg.AsyncConnection[Any], tuple[float, bool]] = (
    WeakKeyDictionary())
#: The live sealed rows still holding legacy tokens: the predicate of migration 0027's
#: partial index, so it answers both whether any remain and how many.
LEGACY_ROWS = "key_version IS NOT NULL AND token_format = 0 AND deleted_at IS NULL"
_ANY_LEGACY = f"SELECT EXISTS (SELECT 1 FROM memories WHERE {LEGACY_ROWS}) AS legacy"


async def legacy_tokens(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether live rows keyed in the legacy token form remain (ADR 0078: queries then key
    each lexeme in both forms), asked at most every :data:`LEGACY_RECHECK_S` seconds per
    connection: rows keyed before migration 0027 only go (the re-sealing worker re-keys
    them); new ones come only from a server of an older release still writing during a
    rolling upgrade, or from a bundle of an older release imported beside a running server,
    found by the next check."""
    now = time.monotonic()
    checked = _LEGACY_CHECKED.get(conn)
    if checked is not None and now < checked[0]:
        return checked[1]
    cur = await conn.execute(_ANY_LEGACY, prepare=True)
    row = await cur.fetchone()
    legacy = bool(row is not None and (row["legacy"] if isinstance(row, dict) else row[0]))
    _LEGACY_CHECKED[conn] = (now + LEGACY_RECHECK_S, legacy)
    return legacy


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
