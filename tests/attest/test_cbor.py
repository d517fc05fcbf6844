"""Deterministic CBOR: RFC 8949 vectors, §4.2.1 key order, refusals, and a cbor2 cross-check."""

from __future__ import annotations

from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attested_cortex.attest.cbor import encode
from attested_cortex.errors import InvalidInputError

# RFC 8949 Appendix A (examples of encoded data items), restricted to the payload type set.
RFC_8949_APPENDIX_A: list[tuple[Any, str]] = [
    (0, "00"),
    (1, "01"),
    (10, "0a"),
    (23, "17"),
    (24, "1818"),
    (25, "1819"),
    (100, "1864"),
    (1000, "1903e8"),
    (1000000, "1a000f4240"),
    (1000000000000, "1b000000e8d4a51000"),
    (18446744073709551615, "1bffffffffffffffff"),
    (-18446744073709551616, "3bffffffffffffffff"),
    (-1, "20"),
    (-10, "29"),
    (-100, "3863"),
    (-1000, "3903e7"),
    (False, "f4"),
    (True, "f5"),
    (None, "f6"),
    (b"", "40"),
    (bytes.fromhex("01020304"), "4401020304"),
    ("", "60"),
    ("a", "6161"),
    ("IETF", "6449455446"),
    ('"\\', "62225c"),
    ("\u00fc", "62c3bc"),
    ("\u6c34", "63e6b0b4"),
    ("\U00010151", "64f0908591"),
    ([], "80"),
    ([1, 2, 3], "83010203"),
    ([1, [2, 3], [4, 5]], "8301820203820405"),
    (
        list(range(1, 26)),
        "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
    ),
    ({}, "a0"),
    ({"a": 1, "b": [2, 3]}, "a26161016162820203"),
    (["a", {"b": "c"}], "826161a161626163"),
    (
        {"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"},
        "a56161614161626142616361436164614461656145",
    ),
]


@pytest.mark.parametrize(("value", "expected"), RFC_8949_APPENDIX_A)
def test_rfc_8949_appendix_a_vectors(value: Any, expected: str) -> None:
    assert encode(value).hex() == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (255, "18ff"),
        (256, "190100"),
        (65535, "19ffff"),
        (65536, "1a00010000"),
        (4294967295, "1affffffff"),
        (4294967296, "1b0000000100000000"),
        (-24, "37"),
        (-25, "3818"),
        ("x" * 23, "77" + "78" * 23),
        ("x" * 24, "7818" + "78" * 24),
        (b"\x00" * 256, "590100" + "00" * 256),
    ],
)
def test_shortest_argument_form_at_every_boundary(value: Any, expected: str) -> None:
    assert encode(value).hex() == expected


def test_map_keys_sort_by_encoded_bytes_so_shorter_keys_come_first() -> None:
    # §4.2.1: "z" (617a) < "aa" (626161), although "aa" < "z" alphabetically.
    assert encode({"aa": 1, "z": 2}).hex() == "a2617a0262616101"


def test_map_key_order_ignores_insertion_order() -> None:
    forward = {"valid_until": None, "dst_id": "d", "src_id": "s", "observed_by": "o"}
    assert encode(forward) == encode(dict(reversed(list(forward.items()))))


def test_tuples_encode_as_arrays() -> None:
    assert encode((1, 2, 3)) == encode([1, 2, 3])


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        float("nan"),
        2**64,
        -(2**64) - 1,
        {1: "integer key"},
        {b"k": "bytes key"},
        {"nested": {("t",): 1}},
        {"a": 1.0},
        [object()],
        {1, 2},
        bytearray(b"x"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_values_outside_the_payload_type_set_are_refused(value: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        encode(value)
    assert info.value.code == "cbor_unsupported"


payload_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=6)
    | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=25,
)


@given(payload_values)
def test_matches_cbor2_canonical_encoding(value: Any) -> None:
    assert encode(value) == cbor2.dumps(value, canonical=True)


@given(payload_values)
def test_round_trips_through_an_independent_decoder(value: Any) -> None:
    assert cbor2.loads(encode(value)) == value


def test_subclasses_of_base_types_encode_as_their_values() -> None:
    import enum

    class Relation(str, enum.Enum):  # noqa: UP042 - the pre-StrEnum idiom, whose str() differs
        RELATED = "related_to"

    class Level(enum.IntEnum):
        TWO = 2

    assert encode({"r": Relation.RELATED, "l": Level.TWO}) == encode({"r": "related_to", "l": 2})
