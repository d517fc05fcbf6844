"""attest_level decisions for each custody case, rejections, and the replay rule."""

from __future__ import annotations

import pytest

from attested_cortex.attest.keyring import EMPTY_KEYRING, KeyRevision, build_keyring
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.levels import check_replay, decide_attestation
from attested_cortex.attest.payloads import LinkPayload, link_payload
from attested_cortex.attest.signing import sign, verify
from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.types import AgentId

AGENT = AgentId("k8s:team-a/planner")
NOW = 1_767_225_600_000


def payload(**change: object) -> LinkPayload:
    fields: dict[str, object] = {
        "src_id": "0b1d6c2e-8a4f-4c3e-9d2a-5f6e7a8b9c0d",
        "dst_id": "7e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        "relation": "related_to", "observed_by": AGENT,
        "valid_from": NOW - 1000, "valid_until": None,
    }
    return link_payload(**{**fields, **change})  # type: ignore[arg-type]


def test_cortex_custody_signs_for_the_agent_self_signed() -> None:
    key = generate_key(AGENT)
    outcome = decide_attestation(
        custody="Cortex", payload=payload(), signature=None,
        keyring=build_keyring([KeyRevision(AGENT, key.public.public_key)]),
        signing_key=key, now_ms=NOW,
    )
    assert outcome.level == "self_signed" and outcome.verified
    assert outcome.signed_by == AGENT and outcome.key_fingerprint == key.public.fingerprint
    assert outcome.signature is not None
    assert verify(key.public.public_key, payload().encode(), outcome.signature)


def test_cortex_never_signs_as_another_agent() -> None:
    with pytest.raises(InvalidInputError) as info:
        decide_attestation(
            custody="Cortex", payload=payload(), signature=None, keyring=EMPTY_KEYRING,
            signing_key=generate_key(AgentId("other")), now_ms=NOW,
        )
    assert info.value.details["field"] == "observed_by"


def test_agent_custody_valid_signature_is_peer_attested() -> None:
    key = generate_key(AGENT)
    outcome = decide_attestation(
        custody="Agent", payload=payload(), signature=sign(key, payload().encode()),
        keyring=build_keyring([KeyRevision(AGENT, key.public.public_key)]),
        signing_key=None, now_ms=NOW,
    )
    assert (outcome.level, outcome.signed_by) == ("peer_attested", AGENT)
    assert outcome.key_fingerprint == key.public.fingerprint


def test_unknown_key_is_accepted_but_flagged_unsigned() -> None:
    key = generate_key(AGENT)
    outcome = decide_attestation(
        custody="Agent", payload=payload(), signature=sign(key, payload().encode()),
        keyring=EMPTY_KEYRING, signing_key=None, now_ms=NOW,
    )
    assert outcome.level == "unsigned" and not outcome.verified
    assert outcome.flags == ("unknown_key",) and outcome.signed_by is None


@pytest.mark.parametrize("custody", ["Agent", "Cortex"])
def test_no_signature_and_no_key_is_unsigned(custody: str) -> None:
    outcome = decide_attestation(
        custody=custody, payload=payload(), signature=None,  # type: ignore[arg-type]
        keyring=EMPTY_KEYRING, signing_key=None, now_ms=NOW,
    )
    assert outcome.level == "unsigned" and outcome.signature is None


def test_known_key_with_bad_signature_is_rejected_with_a_structured_warning() -> None:
    key, impostor = generate_key(AGENT), generate_key(AGENT)
    with pytest.raises(InvalidInputError) as info:
        decide_attestation(
            custody="Agent", payload=payload(), signature=sign(impostor, payload().encode()),
            keyring=build_keyring([KeyRevision(AGENT, key.public.public_key)]),
            signing_key=None, now_ms=NOW,
        )
    error = info.value
    assert (error.code, error.http_status) == ("bad_signature", 400)
    assert error.details["warning"] == "attestation.bad_signature"
    assert error.details["fingerprints_tried"] == [key.public.fingerprint]
    assert error.details["payload_sha256"] == payload().digest().hex()


def test_signature_over_a_different_payload_is_rejected() -> None:
    key = generate_key(AGENT)
    with pytest.raises(InvalidInputError, match="does not verify"):
        decide_attestation(
            custody="Agent", payload=payload(relation="supersedes"),
            signature=sign(key, payload().encode()),
            keyring=build_keyring([KeyRevision(AGENT, key.public.public_key)]),
            signing_key=None, now_ms=NOW,
        )


def test_retired_key_is_rejected_after_its_window() -> None:
    old = generate_key(AGENT)
    keyring = build_keyring([KeyRevision(AGENT, old.public.public_key, valid_until=NOW - 1)])
    with pytest.raises(InvalidInputError) as info:
        decide_attestation(
            custody="Agent", payload=payload(), signature=sign(old, payload().encode()),
            keyring=keyring, signing_key=None, now_ms=NOW,
        )
    assert info.value.code == "bad_signature"


def test_wrong_length_signature_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError) as info:
        decide_attestation(
            custody="Agent", payload=payload(), signature=b"\x00" * 10,
            keyring=EMPTY_KEYRING, signing_key=None, now_ms=NOW,
        )
    assert info.value.details["field"] == "signature"


def test_replay_inside_the_window_of_a_new_link_passes() -> None:
    check_replay(payload(valid_until=NOW + 1), now_ms=NOW, already_recorded=False)


@pytest.mark.parametrize(
    ("link", "recorded", "code"),
    [
        (payload(valid_from=NOW - 10, valid_until=NOW), False, "replay_expired"),
        (payload(valid_from=NOW - 10, valid_until=NOW - 1), False, "replay_expired"),
        (payload(valid_from=NOW + 5 * 60 * 1000 + 1), False, "replay_early"),
        (payload(), True, "replay"),
    ],
    ids=["ends-now", "ended", "not-started", "already-recorded"],
)
def test_replays_are_refused_with_409(link: LinkPayload, recorded: bool, code: str) -> None:
    with pytest.raises(ConflictError) as info:
        check_replay(link, now_ms=NOW, already_recorded=recorded)
    assert (info.value.code, info.value.http_status) == (code, 409)
