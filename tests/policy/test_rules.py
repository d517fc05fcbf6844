"""Permission rules: the leaf-to-root walk (ADR 0009) as a matrix and as properties."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attested_cortex.errors import InvalidInputError
from attested_cortex.policy.decisions import Decision, strictest
from attested_cortex.policy.patterns import covers, matches, parse_pattern
from attested_cortex.policy.rules import Rule, RuleSet, compile_rules


@dataclass
class R:
    namespace: str
    decision: str = "deny"
    agents: tuple[str, ...] = ("*",)
    operations: tuple[str, ...] = ("*",)
    inherit: bool = True
    priority: int = 0
    reason: str | None = None
    source: str = "ns/r"


def ruleset(*rows: R) -> RuleSet:
    return RuleSet(compile_rules([
        type("Row", (), {**r.__dict__, "agents": list(r.agents),
                         "operations": list(r.operations)})() for r in rows]))


def verdict(rs: RuleSet, namespace: str | None, *, agent: str = "a1", op: str = "store",
            default: str = "allow") -> str:
    return rs.evaluate(agent_id=agent, operation=op, namespace=namespace).decision(
        default=default).verdict  # type: ignore[arg-type]


# (rules, namespace, expected verdict) — each row one clause of the walk.
MATRIX = [
    ([], "a/b", "allow"),  # no rule: the default
    ([R("a")], "a", "deny"),  # direct match
    ([R("a")], "a/b/c", "deny"),  # inherited from an ancestor
    ([R("a", inherit=False)], "a", "deny"),  # a non-inheriting rule governs its own level
    ([R("a", inherit=False)], "a/b", "allow"),  # ... and not the children
    ([R("a"), R("a/b", "allow")], "a/b/c", "allow"),  # nearest level wins
    ([R("a", "allow"), R("a/b")], "a/b", "deny"),
    ([R("a"), R("a/b", "allow", inherit=False)], "a/b", "allow"),
    ([R("a"), R("a/b", "allow", inherit=False)], "a/b/c", "allow"),  # barrier: a's deny stops
    ([R("a"), R("a/b", "ask_user", inherit=False), R("a/b", "allow")], "a/b/c", "allow"),
    ([R("a/*")], "a/x", "deny"),  # * is one level
    ([R("a/*")], "a", "allow"),
    ([R("a/*")], "a/x/y", "deny"),  # ... inherited below it
    ([R("a/*", inherit=False)], "a/x/y", "allow"),
    ([R("a/**", inherit=False)], "a/x/y", "deny"),  # ** is any depth
    ([R("**")], None, "deny"),  # no namespace: only ** applies
    ([R("a")], None, "allow"),
    ([R("a", "allow", priority=5), R("a", "deny", priority=1)], "a", "allow"),  # priority
    ([R("a", "allow"), R("a", "deny")], "a", "deny"),  # equal priority: strictest
    ([R("a", "allow"), R("a", "ask_user")], "a/b", "ask_user"),
    ([R("a", agents=("b*",))], "a", "allow"),  # agent glob misses a1
    ([R("a", agents=("a?",))], "a", "deny"),
    ([R("a", operations=("recall",))], "a", "allow"),  # other operation
    ([R("a", operations=("store", "update"))], "a", "deny"),
]


@pytest.mark.parametrize(("rows", "namespace", "expected"), MATRIX)
def test_inheritance_matrix(rows: list[R], namespace: str | None, expected: str) -> None:
    assert verdict(ruleset(*rows), namespace) == expected


def test_no_rule_falls_to_the_configured_default_and_says_so() -> None:
    decision = ruleset().evaluate(agent_id="a", operation="store", namespace="x").decision(
        default="ask_user")
    assert decision.verdict == "ask_user" and decision.source == "default"


def test_the_deciding_rule_is_named_with_its_reason() -> None:
    rs = ruleset(R("a", reason="frozen archive", source="team/archive"))
    decision = rs.evaluate(agent_id="x", operation="store", namespace="a/b").decision(
        default="allow")
    assert decision.source == "rule:team/archive" and decision.reason == "frozen archive"


def test_bad_patterns_are_refused_at_load() -> None:
    for bad in ["", "a//b", "a/../b", "a/b c", "/".join("a" * 9)]:
        with pytest.raises(InvalidInputError):
            parse_pattern(bad)


def test_strictest_wins() -> None:
    allow, ask, deny = (Decision(v, "t") for v in ("allow", "ask_user", "deny"))
    assert strictest(allow, ask) is ask
    assert strictest(ask, deny, allow) is deny
    assert strictest(allow, allow).verdict == "allow"


segment = st.sampled_from(["a", "b", "c"])
namespaces = st.lists(segment, min_size=1, max_size=5).map("/".join)
patterns = st.lists(st.sampled_from(["a", "b", "*", "**"]), min_size=1, max_size=5).map(
    tuple)
kinds = st.sampled_from(["allow", "deny", "ask_user"])


@given(namespaces, namespaces, kinds)
def test_an_inheriting_rule_governs_every_descendant(base: str, tail: str, kind: str) -> None:
    rs = ruleset(R(base, kind))
    assert verdict(rs, base) == kind
    assert verdict(rs, f"{base}/{tail}") == kind


@given(namespaces, namespaces, kinds)
def test_a_rule_elsewhere_changes_nothing(target: str, other: str, kind: str) -> None:
    if target == other or target.startswith(other + "/"):
        return
    assert verdict(ruleset(R(other, kind)), target) == "allow"


@given(namespaces, kinds, kinds)
def test_a_barrier_cuts_every_rule_above_it(namespace: str, above: str, at: str) -> None:
    parts = namespace.split("/")
    if len(parts) < 2:
        return
    barrier = "/".join(parts[:2])
    rs = ruleset(R(parts[0], above), R(barrier, at, inherit=False))
    assert verdict(rs, namespace) == (at if namespace == barrier else "allow")
    assert verdict(rs, parts[0]) == above


@given(patterns, patterns, namespaces)
def test_covers_is_sound(outer: tuple[str, ...], inner: tuple[str, ...], ns: str) -> None:
    if covers(outer, inner) and matches(inner, ns):
        assert matches(outer, ns)


@given(patterns)
def test_covers_is_reflexive_and_double_star_covers_all(pattern: tuple[str, ...]) -> None:
    assert covers(pattern, pattern)
    assert covers(("**",), pattern)


def test_rule_summary_is_one_line() -> None:
    rule = Rule("ns/r", ("a", "**"), ("*",), frozenset({"store"}), "deny", False, 3, "why")
    assert rule.summary() == "[3] deny store in a/** (no inherit) for * (ns/r): why"
