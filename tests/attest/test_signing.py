"""Ed25519 sign/verify, and a link that verifies with nothing but a public key and RFC 8949."""

from __future__ import annotations

import base64

import pytest
from nacl.signing import VerifyKey

from attested_cortex.attest.keys import key_from_seed
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import parse_signature, sign, verify
from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId

# RFC 8032 §7.1, TEST 1.
RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


def test_rfc_8032_test_vector_1() -> None:
    key = key_from_seed(AgentId("rfc"), RFC8032_SEED)
    assert key.public.public_key == RFC8032_PUBLIC
    assert sign(key, b"") == RFC8032_SIGNATURE
    assert verify(RFC8032_PUBLIC, b"", RFC8032_SIGNATURE)


def test_any_changed_byte_fails_verification() -> None:
    key = key_from_seed(AgentId("a"), RFC8032_SEED)
    message = b"the link payload"
    signature = sign(key, message)
    assert verify(RFC8032_PUBLIC, message, signature)
    assert not verify(RFC8032_PUBLIC, b"the link payloaD", signature)
    forged = bytes([signature[0] ^ 1]) + signature[1:]
    assert not verify(RFC8032_PUBLIC, message, forged)


@pytest.mark.parametrize(
    ("public", "signature"),
    [(b"\x00" * 31, b"\x00" * 64), (RFC8032_PUBLIC, b"\x00" * 63), (RFC8032_PUBLIC, b"")],
)
def test_malformed_keys_and_signatures_verify_false(public: bytes, signature: bytes) -> None:
    assert not verify(public, b"", signature)


def _independent_cbor_text(value: str) -> bytes:
    raw = value.encode()
    assert len(raw) < 256
    return (bytes([0x60 | len(raw)]) if len(raw) < 24 else bytes([0x78, len(raw)])) + raw


def _independent_link_bytes(fields: dict[str, str | int | None]) -> bytes:
    """RFC 8949 §4.2.1 written again from scratch for this one map shape."""
    out = bytes([0xA0 | len(fields)])
    for key in sorted(fields, key=lambda k: _independent_cbor_text(k)):
        out += _independent_cbor_text(key)
        value = fields[key]
        if value is None:
            out += b"\xf6"
        elif isinstance(value, int):
            assert 2**32 <= value < 2**64  # a millisecond timestamp: 8-byte argument
            out += b"\x1b" + value.to_bytes(8, "big")
        else:
            out += _independent_cbor_text(value)
    return out


def test_a_signed_link_verifies_with_only_the_public_key_and_rfc_8949() -> None:
    agent = key_from_seed(AgentId("k8s:team-a/planner"), bytes(range(32)))
    payload = link_payload(
        src_id="0b1d6c2e-8a4f-4c3e-9d2a-5f6e7a8b9c0d",
        dst_id="7e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        relation="derived_from", observed_by=agent.agent_id,
        valid_from=1746446400000, valid_until=None,
    )
    signature_b64 = base64.b64encode(sign(agent, payload.encode())).decode()
    public_b64 = agent.public.public_b64
    # A verifier that knows only the public key, the row's fields and RFC 8949:
    message = _independent_link_bytes(
        {
            "src_id": "0b1d6c2e-8a4f-4c3e-9d2a-5f6e7a8b9c0d",
            "dst_id": "7e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
            "relation": "derived_from",
            "observed_by": "k8s:team-a/planner",
            "valid_from": 1746446400000,
            "valid_until": None,
        }
    )
    VerifyKey(base64.b64decode(public_b64)).verify(message, base64.b64decode(signature_b64))


def test_parse_signature_accepts_base64_of_64_bytes() -> None:
    assert parse_signature(base64.b64encode(RFC8032_SIGNATURE).decode()) == RFC8032_SIGNATURE


@pytest.mark.parametrize("text", ["", "not base64!", base64.b64encode(b"x" * 63).decode()])
def test_parse_signature_refuses_malformed_text(text: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_signature(text)
    assert info.value.details["field"] == "signature"


def test_worked_example_known_answer_signature_from_the_docs() -> None:
    """docs/attestation.md: the worked example signed with the RFC 8032 TEST 1 seed."""
    from tests.attest.test_payloads import WORKED_EXAMPLE

    key = key_from_seed(AgentId("k8s:team-a/planner"), RFC8032_SEED)
    signature = sign(key, bytes.fromhex(WORKED_EXAMPLE))
    assert base64.b64encode(signature).decode() == (
        "Zyh5RuhOrmAOpuiplyCYQjHVzgmVl0vwTBWU+W5E3rs4yIHJhi8JR9DQ2Th9UbgHyy+7zS+i04Qkl/7VnCjiBQ=="
    )
