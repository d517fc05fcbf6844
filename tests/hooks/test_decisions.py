"""Decision parsing (strict) and the JSON merge patch used by Modify."""

from __future__ import annotations

from typing import Any

import pytest

from attested_cortex.hooks.decisions import (
    MAX_ANSWER_DEPTH,
    Allow,
    AskUser,
    Deny,
    MalformedDecisionError,
    Modify,
    parse_decision,
)
from attested_cortex.hooks.patching import merge_patch


def test_each_variant() -> None:
    assert parse_decision({"decision": "allow"}) == Allow()
    assert parse_decision({"decision": "modify", "delta": {"a": 1}}) == Modify(delta={"a": 1})
    assert parse_decision({"decision": "deny", "reason": "r"}) == Deny(reason="r")
    assert parse_decision({"decision": "ask_user", "prompt": "p"}) == AskUser(prompt="p")
    assert parse_decision(
        {"decision": "ask_user", "prompt": "p", "options": ["a", "b"]}
    ) == AskUser(prompt="p", options=("a", "b"), default="b")


def nested(levels: int) -> dict[str, Any]:
    """An object nested ``levels`` deep inside the answer (the delta is level 1)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_an_answer_may_nest_to_its_bound() -> None:
    delta = nested(MAX_ANSWER_DEPTH - 1)
    assert parse_decision({"decision": "modify", "delta": delta}) == Modify(delta=delta)


@pytest.mark.parametrize(("raw", "message"), [
    ("allow", "must be a JSON object"),
    ({}, "unknown decision None"),
    ({"decision": "permit"}, "unknown decision 'permit'"),
    ({"decision": "allow", "extra": 1}, "unknown keys for allow"),
    ({"decision": "modify"}, "'delta' must be a JSON object"),
    ({"decision": "modify", "delta": [1]}, "'delta' must be a JSON object"),
    ({"decision": "deny"}, "'reason' must be a non-empty string"),
    ({"decision": "deny", "reason": "r", "code": 7}, "'code' must be a non-empty string"),
    ({"decision": "ask_user"}, "'prompt' must be a non-empty string"),
    ({"decision": "ask_user", "prompt": "p", "options": []}, "non-empty list"),
    ({"decision": "ask_user", "prompt": "p", "options": [1]}, "non-empty list"),
    ({"decision": "ask_user", "prompt": "p", "default": "x"}, "not one of the options"),
    ({"decision": "modify", "delta": {"m": {"x": float("nan")}}}, "NaN, Infinity"),
    ({"decision": "modify", "delta": {"m": [float("inf")]}}, "NaN, Infinity"),
    ({"decision": "modify", "delta": {"content": "a\ud800"}}, "lone UTF-16 surrogate"),
    ({"decision": "modify", "delta": {"\udfff": 1}}, "lone UTF-16 surrogate"),
    ({"decision": "modify", "delta": nested(MAX_ANSWER_DEPTH)}, "deeper than 66 levels"),
    ({"decision": "deny", "reason": "r\x00"}, "without NUL"),
    ({"decision": "ask_user", "prompt": "p", "options": ["a\x00"]}, "non-empty list"),
])
def test_malformed(raw: object, message: str) -> None:
    with pytest.raises(MalformedDecisionError, match=message):
        parse_decision(raw)


# The examples of RFC 7386, appendix A.
RFC_EXAMPLES: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({"a": "foo"}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_EXAMPLES)
def test_merge_patch_rfc_examples(
    target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]
) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == expected
    assert repr(target) == before
