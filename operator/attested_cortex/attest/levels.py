"""Which attest_level a link write earns, and the replay rule: pure decision functions.

Called by the service layer's link pipeline (``sign`` step, before the insert) with inputs
it gathered once: the custody mode of the authenticated agent, the payload, the signature
the client sent (if any), and the current :class:`~attested_cortex.attest.loading.KeySnapshot`.

=================================================  ===============  =====================
case                                               attest_level     outcome
=================================================  ===============  =====================
client signature, valid under a key the keyring     ``peer_attested``  accepted; the signer
trusts for ``observed_by`` now (Agent custody)                       held the private key
no client signature, Cortex custody, key loaded     ``self_signed``  accepted; the cortex
                                                                    signed for the agent
client signature, ``observed_by`` unknown to the     ``unsigned``     accepted, flagged
keyring                                                             ``unknown_key``
no signature and no key to sign with                ``unsigned``     accepted
client signature, ``observed_by`` known, no         (none)           rejected: 400
trusted key verifies it                                             ``bad_signature``
=================================================  ===============  =====================

``self_signed`` means "the cortex vouches that the authenticated agent wrote this";
``peer_attested`` means "the agent's own key, which the cortex never held, signed this" —
the stronger claim, and the only one that holds against the cortex's operator.
The rejection's ``details`` carry a structured warning for the caller to log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attested_cortex.attest.keyring import KeyRevision, Keyring
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.payloads import LinkPayload
from attested_cortex.attest.signing import SIGNATURE_BYTES, sign, verify
from attested_cortex.errors import ConflictError, InvalidInputError

AttestLevel = Literal["unsigned", "self_signed", "peer_attested"]
KeyCustody = Literal["Cortex", "Agent"]
#: How far in the future a signed link's valid_from may lie (clock skew between hosts).
DEFAULT_MAX_SKEW_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class AttestationOutcome:
    """What to store with the link and append to the audit chain."""

    level: AttestLevel
    signature: bytes | None = None
    signed_by: str | None = None
    key_fingerprint: str | None = None
    flags: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """Whether a signature was made or checked here (and so belongs in the chain)."""
        return self.level != "unsigned"


def decide_attestation(
    *,
    custody: KeyCustody,
    payload: LinkPayload,
    signature: bytes | None,
    keyring: Keyring,
    signing_key: AgentKey | None,
    now_ms: int,
) -> AttestationOutcome:
    """Decide the attestation of one link write (see the table in the module docstring)."""
    if signature is not None:
        return _check_presented(payload, signature, keyring=keyring, now_ms=now_ms)
    if custody == "Cortex" and signing_key is not None:
        if signing_key.agent_id != payload.observed_by:
            raise InvalidInputError(
                "the cortex signs only as the authenticated agent", field="observed_by"
            )
        public = signing_key.public
        return AttestationOutcome(
            "self_signed", sign(signing_key, payload.encode()), public.agent_id, public.fingerprint
        )
    return AttestationOutcome("unsigned")


def verify_stored(
    payload: LinkPayload, signature: bytes | None, *, keyring: Keyring, signed_at_ms: int
) -> bool:
    """Re-verify a stored link (``GET /v1/links/{id}/verify``) against keys valid when signed."""
    return verifying_key(payload, signature, keyring=keyring, signed_at_ms=signed_at_ms) is not None


def verifying_key(
    payload: LinkPayload | bytes, signature: bytes | None, *, keyring: Keyring,
    signed_at_ms: int, agent_id: str | None = None,
) -> KeyRevision | None:
    """The key of ``agent_id`` (a link payload's ``observed_by`` by default), trusted at
    ``signed_at_ms``, under which ``signature`` verifies; None when none does."""
    if signature is None:
        return None
    if isinstance(payload, bytes):
        message, signer = payload, agent_id
    else:
        message, signer = payload.encode(), agent_id or payload.observed_by
    if signer is None:
        return None
    for revision in keyring.keys_at(signer, signed_at_ms):
        if verify(revision.public_key, message, signature):
            return revision
    return None


def check_replay(
    payload: LinkPayload, *, now_ms: int, already_recorded: bool,
    max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
) -> None:
    """Refuse a signed link outside its validity window or already recorded (409)."""
    if payload.valid_until is not None and now_ms >= payload.valid_until:
        raise ConflictError(
            "the signed link's validity window has ended", code="replay_expired",
            valid_until=payload.valid_until,
        )
    if payload.valid_from > now_ms + max_skew_ms:
        raise ConflictError(
            "the signed link's validity window has not started", code="replay_early",
            valid_from=payload.valid_from,
        )
    if already_recorded:
        raise ConflictError("this signed link was already recorded", code="replay")


def _check_presented(
    payload: LinkPayload, signature: bytes, *, keyring: Keyring, now_ms: int
) -> AttestationOutcome:
    if len(signature) != SIGNATURE_BYTES:
        raise InvalidInputError("signature must be 64 bytes", field="signature")
    if not keyring.knows(payload.observed_by):
        return AttestationOutcome("unsigned", signature, flags=("unknown_key",))
    message = payload.encode()
    trusted = keyring.keys_at(payload.observed_by, now_ms)
    for revision in trusted:
        if verify(revision.public_key, message, signature):
            return AttestationOutcome(
                "peer_attested", signature, revision.agent_id, revision.fingerprint
            )
    raise InvalidInputError(
        "the signature does not verify under any trusted key of observed_by",
        code="bad_signature",
        field="signature",
        warning="attestation.bad_signature",
        agent_id=payload.observed_by,
        fingerprints_tried=[r.fingerprint for r in trusted],
        payload_sha256=payload.digest().hex(),
    )
