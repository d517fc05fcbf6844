"""Capability scopes (seed 003, Deliverable 4): parsing, the four attenuation rules, and
delegation that can only narrow."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attested_cortex.errors import DeniedError, InvalidInputError
from attested_cortex.policy.scopes import DEFAULT, ScopeSet, attenuate, parse_scope
from attested_cortex.policy.tiers import ceilings


def granted(needed: str, held: str) -> bool:
    return parse_scope(needed).is_granted_by(parse_scope(held))


@pytest.mark.parametrize(("needed", "held", "expected"), [
    ("memory.read", "memory.read", True),
    ("memory.read:team/a", "memory.write", False),  # 1. bases must match
    ("memory.read:team/a", "memory.read", True),  # 2. unqualified grants qualified
    ("memory.read:team/a", "memory.read:team/*", True),  # 3. pattern covers
    ("memory.read:team/a/b", "memory.read:team/*", False),  # * is one level
    ("memory.read:team/a/b", "memory.read:team/**", True),
    ("memory.read:team/*", "memory.read:team/**", True),
    ("memory.read:team/**", "memory.read:team/*", False),  # ** is wider than *
    ("memory.read:other", "memory.read:team/**", False),
    ("memory.read", "memory.read:**", False),  # 4. qualified never grants unqualified
])
def test_attenuation_rules(needed: str, held: str, expected: bool) -> None:
    assert granted(needed, held) is expected


@pytest.mark.parametrize("bad", ["memory.execute", "memory.read:", "memory.read:a//b",
                                 "memory.read:../x", "shell.exec"])
def test_bad_scopes_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_scope(bad)


def test_delegation_only_narrows() -> None:
    parent = ScopeSet.parse(["memory.read", "memory.write:team/**"])
    narrower = ScopeSet.parse(["memory.read:team/a/**", "memory.write:team/a/*"])
    assert attenuate(parent, narrower) == narrower
    for wider in (["memory.write"], ["memory.write:**"], ["memory.forget:team/a"],
                  ["memory.read", "graph.read"]):
        with pytest.raises(DeniedError) as err:
            attenuate(parent, ScopeSet.parse(wider))
        assert err.value.code == "scope_widening"


def test_defaults_hold_everything_but_override() -> None:
    assert DEFAULT.allows("memory.write", "any/where")
    assert not DEFAULT.allows("memory.override", "any/where")


def test_allows_checks_a_namespace_or_any() -> None:
    scopes = ScopeSet.parse(["memory.read:team-a/**"])
    assert scopes.allows("memory.read", "team-a/x") and not scopes.allows("memory.read", "b")
    assert scopes.allows("memory.read", None) and not scopes.holds("memory.read")


segments = st.lists(st.sampled_from(["a", "b", "*", "**"]), min_size=1, max_size=4)


@given(segments, segments)
def test_delegating_a_granted_scope_never_widens(held: list[str], needed: list[str]) -> None:
    parent = ScopeSet.parse([f"memory.read:{'/'.join(held)}"])
    child = ScopeSet.parse([f"memory.read:{'/'.join(needed)}"])
    if parent.grants(child.scopes[0]):
        for namespace in ("a", "b", "a/b", "a/a/b", "b/a/a/a"):
            if child.allows("memory.read", namespace):
                assert parent.allows("memory.read", namespace)


@pytest.mark.parametrize(("held", "passes"), [
    ("memory.forget:**", False), ("memory.forget:*/**", False), ("memory.forget:**/**", False),
    ("memory.forget:**/*", False), ("memory.forget:**/*/**", False),
    ("memory.forget", False), ("memory.forget:proj/**", True), ("memory.forget:*", True),
    ("memory.forget:*/*/**", True)])
def test_a_whole_cortex_pattern_is_not_a_qualifier(held: str, passes: bool) -> None:
    """Issue 37 item 4: ``**`` and every pattern that admits every namespace is bare, so a
    ▲ mark (SemiTrusted's memory.forget) refuses it; a pattern that narrows passes."""
    semi = ceilings()["SemiTrusted"]
    assert bool(semi.confine(ScopeSet.parse([held])).scopes) is passes
    assert ScopeSet.parse([held]).holds("memory.forget") is not passes
