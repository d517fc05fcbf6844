"""The four hook decisions and their strict parsing from a hook's JSON answer.

Transports hand the raw JSON a hook printed to :func:`parse_decision`; the chain
(:mod:`.chaining`) folds the parsed values. Pure: no I/O.

Wire form (one JSON object; ``decision`` picks the variant)::

    {"decision": "allow"}
    {"decision": "modify", "delta": {...JSON merge patch, RFC 7386...}}
    {"decision": "deny", "reason": "why", "code": "machine_code"}
    {"decision": "ask_user", "prompt": "question", "options": ["a", "b"], "default": "a"}

Anything else (unknown variant, missing or mistyped field, unknown key) is malformed, and so
is a value a client could not send either (:mod:`attested_cortex.jsonbounds`): ``NaN`` or
``Infinity``, a lone UTF-16 surrogate, nesting past :data:`MAX_ANSWER_DEPTH`; a Deny's or
AskUser's text may not hold NUL. Those reach the database, the audit record and every
encoder on the way out, where they used to fail as a 500 or be stored past the client's
bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from attested_cortex.errors import InvalidInputError
from attested_cortex.jsonbounds import MAX_JSON_DEPTH, check_value

DecisionKind = Literal["allow", "modify", "deny", "ask_user"]

#: The ``code`` a Deny carries when the hook gave none.
DEFAULT_DENY_CODE: Final = "hook_denied"
#: Deepest nesting of an answer: a client body's bound plus the two levels a delta wraps
#: around it (``{"delta": {"changes": {"metadata": ...}}}`` for a PATCH body's metadata).
MAX_ANSWER_DEPTH: Final = MAX_JSON_DEPTH + 2


class MalformedDecisionError(ValueError):
    """A hook's answer is not a valid decision; the message says what is wrong."""


@dataclass(frozen=True)
class Allow:
    """Let the operation go ahead unchanged."""

    kind: Literal["allow"] = "allow"


@dataclass(frozen=True)
class Modify:
    """Rewrite the payload (pre- events only) with a JSON merge patch."""

    delta: Mapping[str, Any] = field(default_factory=dict)
    kind: Literal["modify"] = "modify"


@dataclass(frozen=True)
class Deny:
    """Stop the chain and refuse the operation."""

    reason: str
    code: str = DEFAULT_DENY_CODE
    kind: Literal["deny"] = "deny"


@dataclass(frozen=True)
class AskUser:
    """Hold the operation for a human; ``default`` is one of ``options``."""

    prompt: str
    options: tuple[str, ...] = ("approve", "deny")
    default: str = "deny"
    kind: Literal["ask_user"] = "ask_user"


Decision: TypeAlias = Allow | Modify | Deny | AskUser

_ALLOWED_KEYS: Final[dict[str, frozenset[str]]] = {
    "allow": frozenset({"decision"}),
    "modify": frozenset({"decision", "delta"}),
    "deny": frozenset({"decision", "reason", "code"}),
    "ask_user": frozenset({"decision", "prompt", "options", "default"}),
}


def parse_decision(raw: object) -> Decision:
    """Turn a hook's decoded JSON answer into a :data:`Decision`, or raise."""
    if not isinstance(raw, dict):
        raise MalformedDecisionError("a decision must be a JSON object")
    kind = raw.get("decision")
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS:
        raise MalformedDecisionError(f"unknown decision {kind!r}")
    extra = set(raw) - _ALLOWED_KEYS[kind]
    if extra:
        raise MalformedDecisionError(f"unknown keys for {kind}: {sorted(extra)}")
    if kind != "allow":
        _check_bounds(raw)
    return _BUILDERS[kind](raw)


def _check_bounds(raw: Mapping[str, Any]) -> None:
    try:
        check_value(raw, surrogates=True, max_depth=MAX_ANSWER_DEPTH)
    except InvalidInputError as exc:
        raise MalformedDecisionError(str(exc).replace("the body", "the answer")) from exc


def _text(raw: Mapping[str, Any], key: str, *, default: str | None = None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value or "\x00" in value:
        raise MalformedDecisionError(f"{key!r} must be a non-empty string without NUL")
    return value


def _allow(raw: Mapping[str, Any]) -> Decision:
    return Allow()


def _modify(raw: Mapping[str, Any]) -> Decision:
    delta = raw.get("delta")
    if not isinstance(delta, dict):
        raise MalformedDecisionError("'delta' must be a JSON object (a merge patch)")
    return Modify(delta=delta)


def _deny(raw: Mapping[str, Any]) -> Decision:
    return Deny(reason=_text(raw, "reason"), code=_text(raw, "code", default=DEFAULT_DENY_CODE))


def _ask_user(raw: Mapping[str, Any]) -> Decision:
    options = raw.get("options", ["approve", "deny"])
    if not isinstance(options, list) or not options:
        raise MalformedDecisionError("'options' must be a non-empty list of strings")
    if not all(isinstance(option, str) and option and "\x00" not in option
               for option in options):
        raise MalformedDecisionError("'options' must be a non-empty list of strings")
    default = _text(raw, "default", default=options[-1])
    if default not in options:
        raise MalformedDecisionError(f"'default' {default!r} is not one of the options")
    return AskUser(prompt=_text(raw, "prompt"), options=tuple(options), default=default)


_BUILDERS = {"allow": _allow, "modify": _modify, "deny": _deny, "ask_user": _ask_user}
