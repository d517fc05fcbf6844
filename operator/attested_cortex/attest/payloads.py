"""The link payload that agents sign, and its canonical bytes.

Pure. Called by :mod:`attested_cortex.attest.levels` (deciding a write's attestation), by the
service layer when it signs or re-verifies a link row (``GET /v1/links/{id}/verify``), and by
clients that sign in Agent custody.

Memory writes an agent signs use :class:`MemoryPayload` (five entries: ``namespace``,
``title``, ``content_sha256``, ``author``, ``signed_at``); docs/attestation.md has a test vector.

The signed link message is the deterministic CBOR (RFC 8949 §4.2.1) of a six-entry map::

    {"dst_id": text, "src_id": text, "relation": text,
     "valid_from": uint, "observed_by": text, "valid_until": uint | null}

(listed in the encoded-key order: shorter keys first, then bytewise). Memory ids are the
memory's UUID as *text* in its canonical form: 36 characters, lowercase hex, hyphenated
(``str(uuid.UUID(...))``). Text rather than the 16 raw bytes so that a client written in any
language, holding the id it read from the JSON API, signs the exact string it has.
Times are integer Unix milliseconds (UTC); ``valid_until`` is ``null`` for an open-ended
link. ``observed_by`` is the signing agent's id, which binds the signature to the key the
verifier looks up.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from attested_cortex.attest import cbor
from attested_cortex.errors import InvalidInputError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_TEXT = 1024
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class LinkPayload:
    """The identity-bearing fields of a link: exactly what a signature covers."""

    src_id: str
    dst_id: str
    relation: str
    observed_by: str
    valid_from: int
    valid_until: int | None

    def encode(self) -> bytes:
        """The canonical CBOR bytes that are signed and verified."""
        return cbor.encode(
            {
                "src_id": self.src_id,
                "dst_id": self.dst_id,
                "relation": self.relation,
                "observed_by": self.observed_by,
                "valid_from": self.valid_from,
                "valid_until": self.valid_until,
            }
        )

    def digest(self) -> bytes:
        """SHA-256 of the canonical bytes: the payload's replay identity in the audit chain."""
        return hashlib.sha256(self.encode()).digest()


def link_payload(
    *,
    src_id: str | uuid.UUID,
    dst_id: str | uuid.UUID,
    relation: str,
    observed_by: str,
    valid_from: int | datetime,
    valid_until: int | datetime | None,
) -> LinkPayload:
    """Build a validated payload; ids and times are normalised to their signed forms."""
    start = to_unix_ms(valid_from)
    end = None if valid_until is None else to_unix_ms(valid_until, field="valid_until")
    if end is not None and end <= start:
        raise InvalidInputError("valid_until must be after valid_from", field="valid_until")
    return LinkPayload(
        src_id=canonical_id(src_id, field="src_id"),
        dst_id=canonical_id(dst_id, field="dst_id"),
        relation=_text(relation, field="relation"),
        observed_by=_text(observed_by, field="observed_by"),
        valid_from=start,
        valid_until=end,
    )


@dataclass(frozen=True, slots=True)
class MemoryPayload:
    """What an agent signs for a memory store or update (docs/attestation.md, "Signed memory
    writes"): the memory's state after the write, bound to its author and a moment."""

    namespace: str
    title: str
    content_sha256: bytes
    author: str
    signed_at: int

    def encode(self) -> bytes:
        """The canonical CBOR bytes that are signed and verified."""
        return cbor.encode({
            "namespace": self.namespace, "title": self.title,
            "content_sha256": self.content_sha256, "author": self.author,
            "signed_at": self.signed_at,
        })


def memory_payload(*, namespace: str, title: str, content: str, author: str,
                   signed_at: int | datetime) -> MemoryPayload:
    """Build a memory payload; ``content`` is hashed (SHA-256 of its UTF-8)."""
    return MemoryPayload(
        namespace=namespace, title=title,
        content_sha256=hashlib.sha256(content.encode()).digest(),
        author=_text(author, field="author"), signed_at=to_unix_ms(signed_at, field="signed_at"),
    )


def canonical_id(value: str | uuid.UUID, *, field: str) -> str:
    """Return the canonical text form of a memory UUID, refusing anything else."""
    if isinstance(value, uuid.UUID):
        return str(value)
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{field} must be a UUID", field=field) from exc


def to_unix_ms(value: int | datetime, *, field: str = "valid_from") -> int:
    """Integer Unix milliseconds of a timestamp; naive datetimes are refused."""
    if isinstance(value, bool) or not isinstance(value, int | datetime):
        raise InvalidInputError("timestamps must be integer Unix milliseconds", field=field)
    if isinstance(value, int):
        if value < 0:
            raise InvalidInputError("timestamps must not be negative", field=field)
        return value
    if value.tzinfo is None:
        raise InvalidInputError("timestamps must carry a time zone", field=field)
    return (value - _EPOCH) // _MS


def from_unix_ms(value: int) -> datetime:
    """The UTC datetime of integer Unix milliseconds (inverse of :func:`to_unix_ms`)."""
    return _EPOCH + value * _MS


def _text(value: str, *, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise InvalidInputError(f"{field} must be 1..{_MAX_TEXT} characters", field=field)
    return value
