"""The signed memory-write payload: the test vector of docs/attestation.md ("Signed memory
writes"), checked against an independent CBOR encoder and the RFC 8032 key."""

from __future__ import annotations

import base64
import hashlib

import cbor2
from nacl.signing import VerifyKey

from attested_cortex.attest.decoding import decode
from attested_cortex.attest.keys import key_from_seed
from attested_cortex.attest.payloads import memory_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId

SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
VECTOR_HEX = (
    "a5657469746c65664c61756e636866617574686f72726b38733a7465616d2d612f706c616e6e6572696e61"
    "6d6573706163656c7465616d2d612f6e6f746573697369676e65645f61741b00000196a0513a006e636f6e"
    "74656e745f736861323536582068bb5739723a36e8668ae7bf2b6615e53f4308406a29c564f0c0ffa789aa"
    "c4c6"
)
VECTOR_SHA256 = "32a4f6d696fa0fa538122ca1cfbfc9a2a1ad3b56d0f383618b8adfd31e5858be"
VECTOR_SIGNATURE = ("+aU6sena2eNOCT6mWWqQ7DkmnwAisJtutadzV8peeGkZzyyaTz2jWZsjhsxkuMJgEhjvaxRDp"
                    "WKlaDF/LkZLAw==")
FIELDS = {"namespace": "team-a/notes", "title": "Launch", "content": "The launch is on Tuesday.",
          "author": "k8s:team-a/planner", "signed_at": 1746446400000}


def test_the_documented_vector() -> None:
    encoded = memory_payload(**FIELDS).encode()  # type: ignore[arg-type]
    assert encoded.hex() == VECTOR_HEX
    assert hashlib.sha256(encoded).hexdigest() == VECTOR_SHA256
    key = key_from_seed(AgentId(str(FIELDS["author"])), SEED)
    assert base64.b64encode(sign(key, encoded)).decode() == VECTOR_SIGNATURE
    VerifyKey(key.public.public_key).verify(encoded, base64.b64decode(VECTOR_SIGNATURE))


def test_an_independent_encoder_makes_the_same_bytes() -> None:
    independent = cbor2.dumps({
        "namespace": FIELDS["namespace"], "title": FIELDS["title"],
        "content_sha256": hashlib.sha256(str(FIELDS["content"]).encode()).digest(),
        "author": FIELDS["author"], "signed_at": FIELDS["signed_at"],
    }, canonical=True)
    assert independent.hex() == VECTOR_HEX


def test_decoding_gives_the_map_back() -> None:
    decoded = decode(bytes.fromhex(VECTOR_HEX))
    assert isinstance(decoded, dict) and decoded["signed_at"] == FIELDS["signed_at"]
    assert decoded["content_sha256"] == hashlib.sha256(b"The launch is on Tuesday.").digest()
