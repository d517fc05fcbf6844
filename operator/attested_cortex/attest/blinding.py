"""Keyed blind tokens for full-text search over sealed memories (issue 27 part 3, ADR 0056).

PostgreSQL computes a memory's lexemes and their positions (``to_tsvector('english', ...)``,
stemming and stop words included) and a query's (``websearch_to_tsquery``); this module
replaces every lexeme in their text forms by a **blind token**: the first 12 bytes of
HMAC-SHA256 under the ``memory`` subkey over a fixed label and the lexeme, as 24 hex
characters. Positions, weights and the query's operators (``&``, ``|``, ``!``, ``<->``) are
kept, so ``@@`` matches and ``ts_rank_cd`` ranks a keyed vector against a keyed query
exactly as the plain ones (tests/store/test_blind_fulltext.py checks it on a fixed set).

What is lost and what leaks is ADR 0056's: prefix matching (a ``:*`` flag survives on a
token, where it means nothing; our recall never sends one), anything that reads lexemes in
the database (``ts_headline``, a changed text search configuration: re-keying from the
opened rows), and the tokens show which memories share a word, how often, and where.

Pure; HMAC from the standard library (the keyed hash is ours to choose, not a cipher).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Final

#: The bytes of HMAC-SHA256 a token keeps: 96 bits, no collision among any cortex's words.
TOKEN_BYTES: Final = 12
_LABEL: Final = b"attested-cortex-v1-fts\0"
#: A quoted lexeme in PostgreSQL's text form of a tsvector or tsquery: quotes doubled and
#: backslashes escaped inside.
_QUOTED = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
_ESCAPE = re.compile(r"''|\\(.)")


def token(key: bytes, lexeme: str) -> str:
    """The blind token of one lexeme under the ``memory`` subkey ``key``."""
    mac = hmac.new(key, _LABEL + lexeme.encode("utf-8"), hashlib.sha256)
    return mac.hexdigest()[:2 * TOKEN_BYTES]


def _unquote(quoted: str) -> str:
    return _ESCAPE.sub(lambda m: "'" if m.group(0) == "''" else m.group(1), quoted)


def _keyed(text: str, key: bytes) -> str:
    def replace(m: re.Match[str]) -> str:
        return f"'{token(key, _unquote(m.group(1)))}'"

    return _QUOTED.sub(replace, text)


def key_tsvector(text: str, key: bytes) -> str:
    """A tsvector's text form (``'word':1A,4B 'other':2``) with each lexeme keyed; cast it
    back with ``::tsvector`` (tokens are hex: no parser or stemmer touches them)."""
    return _keyed(text, key)


def key_tsquery(text: str, key: bytes) -> str:
    """A tsquery's text form (``'word' & 'other' <-> 'third'``) with each lexeme keyed."""
    return _keyed(text, key)
