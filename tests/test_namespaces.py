"""Namespace rules: what is accepted, what is refused and why."""

import pytest

from attested_cortex.errors import InvalidInputError
from attested_cortex.namespaces import ancestors, depth, namespace_problem, parse_namespace


@pytest.mark.parametrize("value", ["a", "org/team/project", "a.b/c_d/e-f/g:h/i@j", "x" * 64,
                                   "/".join(["a"] * 8)])
def test_valid_namespaces(value: str) -> None:
    assert namespace_problem(value) is None


@pytest.mark.parametrize(("value", "why"), [
    ("", "empty"),
    ("a//b", "empty"),
    ("/a", "empty"),
    ("a/", "empty"),
    ("a/./b", "'.'"),
    ("a/../b", "'..'"),
    ("/".join(["a"] * 9), "8 levels"),
    ("a/" + "b" * 65, "1..64"),
    ("a b", "1..64"),
    ("a/\x00", "1..64"),
    ("é", "1..64"),
    ("a" * 513, "512"),
])
def test_invalid_namespaces_say_why(value: str, why: str) -> None:
    problem = namespace_problem(value)
    assert problem is not None and why in problem
    with pytest.raises(InvalidInputError) as err:
        parse_namespace(value, field="namespace")
    assert err.value.details["field"] == "namespace"


def test_ancestors_nearest_first() -> None:
    assert ancestors("a/b/c") == ["a/b/c", "a/b", "a"]
    assert depth("a/b/c") == 3
