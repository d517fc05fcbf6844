"""The sign step of the link pipeline and the re-verification of stored links.

Gathers its inputs once (the caller, the link's identity-bearing fields, the signature the
client sent, the current key snapshot) and hands them to the pure decisions of
:mod:`attested_cortex.attest.levels`. Custody is per agent: an agent whose private key is
mounted into the cortex (an ``AgentIdentity`` with ``keyCustody: Cortex``) gets its links
signed by the cortex; any other agent signs its own links (``keyCustody: Agent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attested_cortex.attest.keyring import KeyRevision
from attested_cortex.attest.levels import (
    AttestationOutcome,
    KeyCustody,
    check_replay,
    decide_attestation,
    verifying_key,
)
from attested_cortex.attest.loading import KeySnapshot, KeySource
from attested_cortex.attest.payloads import LinkPayload, from_unix_ms, link_payload, to_unix_ms
from attested_cortex.attest.signing import parse_signature
from attested_cortex.errors import InvalidInputError
from attested_cortex.store.links import Link
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
