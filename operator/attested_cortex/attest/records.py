"""Write records: what the audit chain keeps about every memory and link write. Pure.

Built by :mod:`attested_cortex.service.pipeline.write_records` after each write (the payload of a
``memory.*``, ``link.*`` or ``transcript.*`` record event; the transcript sweeper builds
those of its archives and prunes) and rebuilt from the current rows by
:mod:`.sweeping` (``cortexctl audit verify --deep``): a row whose rebuilt record differs from
its latest event was changed behind the server; one without any event was written behind it.

A record is a deterministic CBOR map (docs/attestation.md, "Write records"). Texts that may
be large or private (content, title, tags) are carried as SHA-256 digests; ``metadata`` is
not covered for memories and links (PostgreSQL's jsonb normalises numbers, so the bytes a
client sent do not survive a round trip). A transcript's record covers its metadata as the
database returns it (:func:`json_sha256`: written from the row the INSERT returned, so both
sides hash the same normalised value) and its frame by digest, NULL once pruned. Since
migration 0021 a record also names the trust ``tier`` and the effective ``scopes`` of the
request that wrote the row (:func:`written_by`), kept in the row too so the deep audit checks
them like every other field; since migration 0040 also its ``allowed`` summary (ADR 0124).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from attested_cortex.attest import cbor
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.transcripts import Recorded

RECORD_VERSION: Final = 1
MemoryEvent = Literal["memory.stored", "memory.updated", "memory.deleted", "memory.resealed"]
LinkEvent = Literal["link.recorded", "link.invalidated"]
#: ``memory.resealed``: the row sealed (or re-sealed) under a newer master key version.
MEMORY_EVENTS: Final = ("memory.stored", "memory.updated", "memory.deleted", "memory.resealed")
LINK_EVENTS: Final = ("link.recorded", "link.invalidated")
TranscriptEvent = Literal["transcript.stored", "transcript.archived", "transcript.pruned",
                          "transcript.resealed"]
#: ``transcript.resealed``: the frame re-sealed under a newer master key version (ADR 0056).
TRANSCRIPT_EVENTS: Final = ("transcript.stored", "transcript.archived", "transcript.pruned",
                            "transcript.resealed")
#: How much a link's attestation claims: a drop between event and row is a downgrade.
LEVEL_RANK: Final = {"unsigned": 0, "self_signed": 1, "peer_attested": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def sha256(data: bytes | str) -> bytes:
    """SHA-256 of bytes, or of a text's UTF-8."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).digest()


def memory_record(memory: Memory, signature: bytes | None = None) -> dict[str, cbor.CborValue]:
    """The record of a memory's state after a write (``signature``: the agent's signature of
    this revision, when the write was signed). A memory sealed at rest (ADR 0065) is
    recorded as stored: its key version and the digest of its sealed value (which binds
    title, content and metadata under the key) instead of its title's and content's, so the
    deep audit and a bundle's import check it without the key, and the chain holds no digest
    of guessable text."""
    record: dict[str, cbor.CborValue] = {
        "v": RECORD_VERSION,
        "memory_id": str(memory.id),
        "revision": memory.revision,
        "namespace": memory.namespace,
        "author": memory.author,
        "deleted": memory.deleted,
        "tags_sha256": sha256(cbor.encode(list(memory.tags))),
        "signature_sha256": None if signature is None else sha256(signature),
        **written_by(memory.written_tier, memory.written_scopes, memory.written_allowed),
    }
    if memory.key_version is not None and memory.sealed_sha256 is not None:
        # sealed: the digests of its text are never computed (they would be dropped)
        record.update(key_version=memory.key_version, sealed_sha256=memory.sealed_sha256)
    else:
        record.update(title_sha256=sha256(memory.title), content_sha256=sha256(memory.content))
    return record


def link_record(link: Link) -> dict[str, cbor.CborValue]:
    """The record of a link's state after a write (creation or invalidation)."""
    return {
        "v": RECORD_VERSION,
        "link_id": str(link.id),
        "src_id": str(link.src_id),
        "dst_id": str(link.dst_id),
        "relation": link.relation,
        "observed_by": link.observed_by,
        "valid_from": unix_ms(link.valid_from),
        "valid_until": None if link.valid_until is None else unix_ms(link.valid_until),
        "asserted_until": None if link.asserted_until is None else unix_ms(link.asserted_until),
        "attest_level": link.attest_level,
        "signed_by": link.signed_by,
        "signature_sha256": None if link.signature is None else sha256(link.signature),
        **written_by(link.written_tier, link.written_scopes, link.written_allowed),
    }


def transcript_record(row: Recorded) -> dict[str, cbor.CborValue]:
    """The record of a transcript's state after a write (store, archive, prune)."""
    t = row.transcript
    return {
        "v": RECORD_VERSION,
        "transcript_id": str(t.id),
        "namespace": t.namespace,
        "owner": t.owner,
        "raw_bytes": t.raw_bytes,
        "raw_chars": t.raw_chars,
        "stored_bytes": t.stored_bytes,
        "created_at": unix_ms(t.created_at),
        "archived_at": None if t.archived_at is None else unix_ms(t.archived_at),
        "pruned_at": None if t.pruned_at is None else unix_ms(t.pruned_at),
        "metadata_sha256": json_sha256(t.metadata),
        "frame_sha256": row.frame_sha256,
        **written_by(t.written_tier, t.written_scopes, t.written_allowed),
    }


def written_by(tier: str | None, scopes: tuple[str, ...] | None,
               allowed: tuple[str, ...] | None = None) -> dict[str, cbor.CborValue]:
    """``tier`` and ``scopes``: the trust tier and effective scopes (held ∩ the tier's
    ceiling, sorted) of the request that wrote the row (ADR 0066, migration 0021). Absent
    from rows written before (NULL), so their records, made without them, still match.
    ``allowed``: the request's Allow summary (ADR 0124, migration 0040), absent likewise
    from rows written before it."""
    record: dict[str, cbor.CborValue] = (
        {} if tier is None else {"tier": tier, "scopes": list(scopes or ())})
    if allowed is not None:
        record["allowed"] = list(allowed)
    return record


def json_sha256(value: object) -> bytes:
    """SHA-256 of a JSON value with sorted keys, no spaces, ASCII only (as parsed from
    jsonb: the same normalised value gives the same digest on every read)."""
    return sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True))


def unix_ms(moment: datetime) -> int:
    """Integer Unix milliseconds (negative before 1970; links may start then)."""
    return (moment - _EPOCH) // _MS


def differing(expected: dict[str, cbor.CborValue], recorded: object) -> list[str]:
    """The fields where a rebuilt record and a recorded one differ (all when unreadable)."""
    if not isinstance(recorded, dict):
        return sorted(expected)
    return sorted(k for k in expected.keys() | recorded.keys()
                  if expected.get(k) != recorded.get(k))


def downgraded(expected: dict[str, cbor.CborValue], recorded: dict[str, cbor.CborValue]) -> bool:
    """Whether a link row now claims less attestation than its recorded write did, or lost
    the signature it was recorded with."""
    was = LEVEL_RANK.get(str(recorded.get("attest_level")), 0)
    now = LEVEL_RANK.get(str(expected.get("attest_level")), 0)
    lost = recorded.get("signature_sha256") is not None and (
        expected.get("signature_sha256") != recorded.get("signature_sha256"))
    return now < was or (was > 0 and lost)
