"""The sign step of the link pipeline and the re-verification of stored links.

Gathers its inputs once (the caller, the link's identity-bearing fields, the signature the
client sent, the current key snapshot) and hands them to the pure decisions of
:mod:`attested_cortex.attest.levels`. Custody is per agent: an agent whose private key is
mounted into the cortex (an ``AgentIdentity`` with ``keyCustody: Cortex``) gets its links
signed by the cortex; any other agent signs its own links (``keyCustody: Agent``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attested_cortex.attest.keyring import KeyRevision
from attested_cortex.attest.levels import (
    DEFAULT_MAX_SKEW_MS,
    AttestationOutcome,
    KeyCustody,
    check_replay,
    decide_attestation,
    verifying_key,
)
from attested_cortex.attest.loading import KeySnapshot, KeySource
from attested_cortex.attest.payloads import (
    LinkPayload,
    MemoryPayload,
    from_unix_ms,
    link_payload,
    memory_payload,
    to_unix_ms,
)
from attested_cortex.attest.signing import parse_signature
from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.signatures import MemorySignature
from attested_cortex.types import AgentId

EMPTY = KeySnapshot()


@dataclass(frozen=True)
class SignedLinkPlan:
    """What the write step stores: exact (millisecond) times and the attestation."""

    payload: LinkPayload
    valid_from: datetime
    valid_until: datetime | None
    outcome: AttestationOutcome
    signed_at: datetime | None


def snapshot(keys: KeySource | None) -> KeySnapshot:
    """The current keys (empty when the server has no key directory)."""
    return keys.snapshot() if keys is not None else EMPTY


def exact_ms(moment: datetime) -> datetime:
    """``moment`` truncated to the millisecond: what is stored is exactly what was signed."""
    return from_unix_ms(to_unix_ms(moment))


def plan_link(
    *, keys: KeySnapshot, agent_id: str, src_id: Any, dst_id: Any, relation: str,
    valid_from: datetime | None, valid_until: datetime | None, signature: str | None,
    now: datetime | None = None,
) -> SignedLinkPlan:
    """Decide how a new link is attested (raises 400 for a bad signature, 409 for replay)."""
    moment = exact_ms(now or datetime.now(UTC))
    start = exact_ms(valid_from) if valid_from is not None else moment
    end = exact_ms(valid_until) if valid_until is not None else None
    payload = link_payload(src_id=src_id, dst_id=dst_id, relation=relation,
                           observed_by=agent_id, valid_from=start, valid_until=end)
    presented = parse_signature(signature) if signature is not None else None
    now_ms = to_unix_ms(moment)
    signing_key = keys.signing_keys.get(AgentId(agent_id))
    custody: KeyCustody = "Cortex" if signing_key is not None else "Agent"
    if (presented is not None or signing_key is not None) and payload.valid_from < 0:
        # docs/attestation.md: the signed valid_from is an unsigned integer of milliseconds.
        raise InvalidInputError("a signed link's valid_from must not be before 1970-01-01",
                                field="valid_from")
    outcome = decide_attestation(
        custody=custody, payload=payload, signature=presented, keyring=keys.keyring,
        signing_key=signing_key, now_ms=now_ms,
    )
    if presented is not None:
        check_replay(payload, now_ms=now_ms, already_recorded=False)
    return SignedLinkPlan(payload, start, end, outcome,
                          moment if outcome.level != "unsigned" else None)


def verification(link: Link, keys: KeySnapshot) -> dict[str, Any]:
    """``GET /v1/links/{id}/verify``: recompute the payload from the stored row and check it.

    The answer trusts nothing the row claims about itself: the signature must verify under a
    key of ``observed_by`` (the payload binds it) trusted when it was signed, ``signed_by``
    must be ``observed_by``, and the level is derived from who holds the verifying key (the
    cortex: ``self_signed``; only the agent: ``peer_attested``). A stored level that differs
    from the derived one is reported and the link does not verify.
    """
    payload = link_payload(src_id=link.src_id, dst_id=link.dst_id, relation=link.relation,
                           observed_by=link.observed_by, valid_from=link.valid_from,
                           valid_until=link.asserted_until)
    signed_at = link.signed_at or link.created_at
    revision = verifying_key(payload, link.signature, keyring=keys.keyring,
                             signed_at_ms=to_unix_ms(signed_at))
    derived = derive_level(revision, keys, agent_id=link.observed_by)
    reason = _refusal(link, revision, derived)
    return {
        "link_id": str(link.id),
        "signature_verified": reason is None,
        "attest_level": derived,
        "stored_attest_level": link.attest_level,
        "signed_by": link.signed_by,
        "observed_by": link.observed_by,
        "key_fingerprint": revision.fingerprint if revision is not None else None,
        "signed_at": link.signed_at.isoformat() if link.signed_at else None,
        "reason": reason,
    }


def derive_level(revision: KeyRevision | None, keys: KeySnapshot, *, agent_id: str) -> str:
    """The level a verifying key supports: none, the cortex's custody, or the agent's own."""
    if revision is None:
        return "unsigned"
    return "self_signed" if AgentId(agent_id) in keys.signing_keys else "peer_attested"


def _refusal(link: Link, revision: KeyRevision | None, derived: str) -> str | None:
    if link.signature is None:
        return "unsigned"
    if revision is None:
        return "no_trusted_key_verifies"
    if link.signed_by != link.observed_by:
        return "signed_by_is_not_observed_by"
    if link.attest_level != derived:
        return "stored_level_differs"
    return None


@dataclass(frozen=True)
class SignedMemoryPlan:
    """An agent's verified signature of a memory write."""

    payload: MemoryPayload
    signature: bytes
    key: KeyRevision
    level: str
    signed_at: datetime


def plan_memory(
    *, keys: KeySnapshot, agent_id: str, namespace: str, title: str, content: str,
    signature: str | None, signed_at: datetime | None, now: datetime | None = None,
) -> SignedMemoryPlan | None:
    """Check a signed memory write (None when unsigned, or signed by an agent the keyring does
    not know: accepted unsigned, as for links). 400 for a bad signature, 409 for a
    ``signed_at`` more than 5 minutes from now (a replayed or pre-made signature)."""
    if signature is None:
        if signed_at is not None:
            raise InvalidInputError("signed_at needs a signature", field="signed_at")
        return None
    if signed_at is None:
        raise InvalidInputError("a signed write needs signed_at", field="signed_at")
    presented = parse_signature(signature)
    at, now_ms = exact_ms(signed_at), to_unix_ms(exact_ms(now or datetime.now(UTC)))
    if abs(to_unix_ms(at) - now_ms) > DEFAULT_MAX_SKEW_MS:
        raise ConflictError("signed_at is more than 5 minutes from the server's clock",
                            code="replay_window", field="signed_at")
    payload = memory_payload(namespace=namespace, title=title, content=content,
                             author=agent_id, signed_at=at)
    if not keys.keyring.knows(agent_id):
        return None
    key = verifying_key(payload.encode(), presented, keyring=keys.keyring, signed_at_ms=now_ms,
                        agent_id=agent_id)
    if key is None:
        raise InvalidInputError(
            "the signature does not verify under any trusted key of the agent",
            code="bad_signature", field="signature", payload_sha256=payload_digest(payload))
    return SignedMemoryPlan(payload, presented, key,
                            derive_level(key, keys, agent_id=agent_id), at)


def memory_verification(memory: Memory, sig: MemorySignature | None,
                        keys: KeySnapshot) -> dict[str, Any]:
    """``GET /v1/memories/{id}/verify``: the current revision's signature, recomputed from the
    row (same rules and answer shape as :func:`verification` for links)."""
    answer: dict[str, Any] = {
        "memory_id": str(memory.id), "revision": memory.revision,
        "signature_verified": False, "attest_level": "unsigned",
        "stored_attest_level": "unsigned", "signed_by": None, "key_fingerprint": None,
        "signed_at": None, "reason": "unsigned",
    }
    if sig is None:
        return answer
    payload = memory_payload(namespace=memory.namespace, title=memory.title,
                             content=memory.content, author=sig.signed_by,
                             signed_at=sig.signed_at)
    key = verifying_key(payload.encode(), sig.signature, keyring=keys.keyring,
                        signed_at_ms=to_unix_ms(sig.signed_at), agent_id=sig.signed_by)
    derived = derive_level(key, keys, agent_id=sig.signed_by)
    reason = None if key is not None and derived == sig.attest_level else (
        "no_trusted_key_verifies" if key is None else "stored_level_differs")
    return {**answer, "signature_verified": reason is None, "attest_level": derived,
            "stored_attest_level": sig.attest_level, "signed_by": sig.signed_by,
            "key_fingerprint": key.fingerprint if key is not None else None,
            "signed_at": sig.signed_at.isoformat(), "reason": reason}


def payload_digest(payload: MemoryPayload) -> str:
    """SHA-256 hex of a payload's canonical bytes (for the bad-signature warning)."""
    return hashlib.sha256(payload.encode()).hexdigest()
