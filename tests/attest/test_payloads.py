"""The signed link payload: its exact bytes (derived by hand from RFC 8949) and its validation."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import cbor2
import pytest

from attested_cortex.attest.payloads import LinkPayload, from_unix_ms, link_payload, to_unix_ms
from attested_cortex.errors import InvalidInputError

SRC = "0b1d6c2e-8a4f-4c3e-9d2a-5f6e7a8b9c0d"
DST = "7e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
VALID_FROM = 1746446400000  # 2025-05-05T12:00:00Z

# Every head byte worked out from RFC 8949 §3 / §4.2.1 (major type << 5 | argument):
# keys sorted by their encoded bytes, so by length first: 6, 6, 8, 10, 11, 11 characters.
WORKED_EXAMPLE = "".join(
    [
        "a6",  # map (major 5) of 6 pairs
        "66" + b"dst_id".hex(),  # text (major 3), length 6
        "7824" + DST.encode().hex(),  # text, length 36 >= 24: one-byte length 0x24
        "66" + b"src_id".hex(),
        "7824" + SRC.encode().hex(),
        "68" + b"relation".hex(),  # length 8
        "6a" + b"related_to".hex(),  # length 10
        "6a" + b"valid_from".hex(),
        "1b" + "00000196a0513a00",  # uint (major 0) > 2**32: 8-byte argument
        "6b" + b"observed_by".hex(),  # length 11; "o" < "v", so before valid_until
        "72" + b"k8s:team-a/planner".hex(),  # length 18
        "6b" + b"valid_until".hex(),
        "f6",  # null
    ]
)


def example() -> LinkPayload:
    return link_payload(
        src_id=SRC, dst_id=DST, relation="related_to", observed_by="k8s:team-a/planner",
        valid_from=VALID_FROM, valid_until=None,
    )


def test_worked_example_bytes() -> None:
    assert example().encode().hex() == WORKED_EXAMPLE


def test_worked_example_matches_cbor2_canonical() -> None:
    fields = {
        "src_id": SRC, "dst_id": DST, "relation": "related_to",
        "observed_by": "k8s:team-a/planner", "valid_from": VALID_FROM, "valid_until": None,
    }
    assert example().encode() == cbor2.dumps(fields, canonical=True)


def test_ids_are_signed_as_canonical_lowercase_uuid_text() -> None:
    upper = link_payload(
        src_id=SRC.upper(), dst_id=uuid.UUID(DST), relation="related_to",
        observed_by="k8s:team-a/planner", valid_from=VALID_FROM, valid_until=None,
    )
    assert upper == example()


def test_datetimes_become_unix_milliseconds() -> None:
    moment = datetime(2025, 5, 5, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert to_unix_ms(moment) == VALID_FROM
    assert from_unix_ms(VALID_FROM) == datetime(2025, 5, 5, 12, tzinfo=UTC)


def test_valid_until_is_an_integer_when_set() -> None:
    payload = link_payload(
        src_id=SRC, dst_id=DST, relation="supersedes", observed_by="a",
        valid_from=VALID_FROM, valid_until=VALID_FROM + 1,
    )
    assert cbor2.loads(payload.encode())["valid_until"] == VALID_FROM + 1


def test_digest_is_sha256_of_the_bytes() -> None:
    import hashlib

    assert example().digest() == hashlib.sha256(bytes.fromhex(WORKED_EXAMPLE)).digest()


GOOD: dict[str, Any] = {
    "src_id": SRC, "dst_id": DST, "relation": "related_to", "observed_by": "a",
    "valid_from": VALID_FROM, "valid_until": None,
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"src_id": "mem_abc123"}, "src_id"),
        ({"dst_id": ""}, "dst_id"),
        ({"dst_id": 42}, "dst_id"),
        ({"relation": ""}, "relation"),
        ({"relation": "r" * 1025}, "relation"),
        ({"observed_by": ""}, "observed_by"),
        ({"valid_from": -1}, "valid_from"),
        ({"valid_from": True}, "valid_from"),
        ({"valid_from": 1.5}, "valid_from"),
        ({"valid_from": datetime(2025, 5, 5)}, "valid_from"),
        ({"valid_until": VALID_FROM}, "valid_until"),
        ({"valid_until": VALID_FROM - 1}, "valid_until"),
        ({"valid_until": "tomorrow"}, "valid_until"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        link_payload(**{**GOOD, **change})
    assert info.value.details["field"] == field
