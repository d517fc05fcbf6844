"""Keyed blind tokens for full-text search over sealed memories (issue 27 part 3, ADR 0056).

PostgreSQL computes a memory's lexemes and their positions (``to_tsvector('english', ...)``,
stemming and stop words included) and a query's (``websearch_to_tsquery``); this module
replaces every lexeme in their text forms by a **blind token**: the first 9 bytes of
HMAC-SHA256 under the ``memory`` subkey over a fixed label and the lexeme, as 12 base64url
characters (ADR 0078: rows keyed before migration 0027 hold the first 12 bytes as 24 hex
characters, the **legacy** form, until the re-sealing worker re-keys them; a
``Blinder(key, legacy=True)`` keys queries for them). Positions, weights and the query's
operators (``&``, ``|``, ``!``, ``<->``) are kept, so ``@@`` matches and ``ts_rank_cd``
ranks a keyed vector against a keyed query exactly as the plain ones
(tests/store/test_blind_fulltext.py checks it on a fixed set).

What is lost and what leaks is ADR 0056's: prefix matching (a ``:*`` flag survives on a
token, where it means nothing; our recall never sends one), anything that reads lexemes in
the database (``ts_headline``, a changed text search configuration: re-keying from the
opened rows), and the tokens show which memories share a word, how often, and where.

Pure; HMAC from the standard library (the keyed hash is ours to choose, not a cipher).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from collections.abc import Callable
from typing import Final

#: The bytes of HMAC-SHA256 a token keeps: 72 bits (a collision among a million distinct
#: lexemes has odds of 1 in 9 billion; one would merge two words' matches, nothing more),
#: as 12 base64url characters, half the legacy token's width (ADR 0078).
TOKEN_BYTES: Final = 9
#: The legacy token (before migration 0027): 12 bytes as 24 hex characters.
LEGACY_TOKEN_BYTES: Final = 12
#: The lexemes a :class:`Blinder` keeps the tokens of, per form (text and binary: about
#: 10 MB each at most, per key).
CACHED: Final = 1 << 15
_LABEL: Final = b"attested-cortex-v1-fts\0"
#: A quoted lexeme in PostgreSQL's text form of a tsvector or tsquery: quotes doubled and
#: backslashes escaped inside (the loop unrolled: one way to match, twice as fast as an
#: alternation per character, and no backtracking blow-up on a quote left open).
_QUOTED = re.compile(r"'([^'\\]*(?:(?:''|\\.)[^'\\]*)*)'")
_ESCAPE = re.compile(r"''|\\(.)")
#: One entry of a tsvector's binary form after its 32-bit count: the lexeme (group 1, no NUL
#: in it), then its NUL, position count and positions (group 2), for up to
#: :data:`_SPLIT_POSITIONS` positions (the count's high byte zero, each branch one low
#: byte: the count decides how many bytes follow, so a NUL among them is never taken for a
#: lexeme's end). A lexeme with more positions: the loop of ``_key_binary_loop``.
_SPLIT_POSITIONS: Final = 32
_ENTRY = re.compile(
    b"([^\\x00]+)(\\x00\\x00(?:"
    + b"|".join(re.escape(bytes([n])) + b".{%d}" % (2 * n) for n in range(_SPLIT_POSITIONS + 1))
    + b"))", re.S)


def token(key: bytes, lexeme: str) -> str:
    """The blind token of one lexeme under the ``memory`` subkey ``key``."""
    return blinder(key).token(lexeme)


def _unquote(quoted: str) -> str:
    if "'" not in quoted and "\\" not in quoted:
        return quoted  # most lexemes: nothing escaped
    return _ESCAPE.sub(lambda m: "'" if m.group(0) == "''" else m.group(1), quoted)


class Blinder:
    """The blind tokens of one key, each lexeme's computed once (issue 27: keying was most
    of what sealing added to a batch store, ADR 0065).

    HMAC's keyed inner and outer states are made once (the key's pads) and copied for each
    lexeme; the token of a lexeme **as it appears quoted** in PostgreSQL's text forms is
    kept in a bounded LRU (:data:`CACHED` entries: words repeat, so most of a memory's are
    hits), and the token of a lexeme as its UTF-8 bytes in the binary form (a sealed
    batch's vectors: :meth:`key_binary`) in another. A token never changes for its key, so
    the caches answer exactly what the HMAC would. They hold lexemes beside their tokens in
    the server's memory, which already holds the key they are keyed by and every request's
    text; nothing of them is written anywhere.
    """

    def __init__(self, key: bytes, *, legacy: bool = False) -> None:
        self._keyed = hmac.new(key, _LABEL, hashlib.sha256)
        self._encode: Callable[[bytes], bytes] = (
            _legacy_encoding if legacy else _encoding)
        self._quoted: Callable[[str], str] = functools.lru_cache(maxsize=CACHED)(
            self._of_quoted)
        self._raw: Callable[[bytes], bytes] = functools.lru_cache(maxsize=CACHED)(
            self._of_raw)

    def token(self, lexeme: str) -> str:
        """The blind token of ``lexeme``."""
        mac = self._keyed.copy()
        mac.update(lexeme.encode("utf-8"))
        return self._encode(mac.digest()).decode("ascii")

    def _of_quoted(self, quoted: str) -> str:
        return f"'{self.token(_unquote(quoted))}'"

    def _of_raw(self, lexeme: bytes) -> bytes:
        mac = self._keyed.copy()
        mac.update(lexeme)
        return self._encode(mac.digest())

    def key_binary(self, vector: bytes) -> bytes:
        """A tsvector's binary form (PostgreSQL's ``tsvectorsend``: a 32-bit count, then
        per lexeme its UTF-8 bytes, a NUL, a 16-bit count of positions and the positions,
        16 bits each, weight in the top two) with each lexeme replaced by its token, the
        positions copied as they are: what a binary COPY sends for a keyed vector
        (``tsvectorrecv`` sorts the tokens). The same tokens as :meth:`key_text`."""
        # lexeme, its positions, '' (nothing between entries), lexeme, ...: split by a
        # pattern that consumes each entry whole (a split of C speed; a loop over the
        # entries in Python is three times slower than keying the text form)
        parts = _ENTRY.split(vector[4:])
        if any(parts[::3]) or len(parts) != 1 + 3 * int.from_bytes(vector[:4], "big"):
            return self._key_binary_loop(vector)  # a lexeme with more positions
        parts[0] = vector[:4]
        parts[1::3] = map(self._raw, parts[1::3])
        return b"".join(parts)

    def _key_binary_loop(self, vector: bytes) -> bytes:
        count = int.from_bytes(vector[:4], "big")
        parts = [vector[:4]]
        at = 4
        for _ in range(count):
            nul = vector.index(0, at)
            end = nul + 3 + 2 * ((vector[nul + 1] << 8) | vector[nul + 2])
            parts += [self._raw(vector[at:nul]), vector[nul:end]]
            at = end
        if at != len(vector):
            raise ValueError("not a tsvector's binary form")
        return b"".join(parts)

    def key_text(self, text: str) -> str:
        """A tsvector's or tsquery's text form with each quoted lexeme replaced by its
        token, quoted (positions, weights and operators kept as they are)."""
        # text, lexeme, text, lexeme, ..., text; with no quote inside a lexeme (nearly always)
        # splitting on quotes gives the same pieces, several times faster than the pattern
        escaped = "''" in text or "\\" in text
        parts = _QUOTED.split(text) if escaped else text.split("'")
        parts[1::2] = map(self._quoted, parts[1::2])
        return "".join(parts)


def _encoding(digest: bytes) -> bytes:
    return base64.urlsafe_b64encode(digest[:TOKEN_BYTES])  # 9 bytes: 12 characters, no "="


def _legacy_encoding(digest: bytes) -> bytes:
    return digest[:LEGACY_TOKEN_BYTES].hex().encode("ascii")


@functools.lru_cache(maxsize=8)
def blinder(key: bytes, *, legacy: bool = False) -> Blinder:
    """The :class:`Blinder` of ``key`` (``legacy``: its legacy tokens), one per key and form
    (its HMAC state and its tokens kept): found by the key itself, so a reloaded ring is
    never answered from another key's tokens; the eight most recently used (a ring holds a
    version or two, legacy forms only while legacy rows remain), so at most eight token
    caches are held."""
    return Blinder(key, legacy=legacy)


def key_tsvector(text: str, key: bytes) -> str:
    """A tsvector's text form (``'word':1A,4B 'other':2``) with each lexeme keyed; cast it
    back with ``::tsvector`` (tokens are cast as they are: no parser or stemmer touches them)."""
    return blinder(key).key_text(text)


def key_tsquery(text: str, key: bytes) -> str:
    """A tsquery's text form (``'word' & 'other' <-> 'third'``) with each lexeme keyed."""
    return blinder(key).key_text(text)
