"""The safety rule of a post_recall reorder (docs/adr/0071): pure values."""

from typing import Any

import pytest

from attested_cortex.hooks.decisions import Modify
from attested_cortex.hooks.reordering import UnsafeReorderError, screen

SHOWN = {"query": "q", "results": [{"id": "a", "content": "A", "score": 0.9},
                                   {"id": "b", "content": "B", "score": 0.5}]}


def test_a_reorder_resolves_to_the_shown_hits() -> None:
    screened = screen(SHOWN, Modify({"results": [{"id": "b", "score": 2}, {"id": "a"}]}))
    assert screened.delta == {"results": [{"id": "b", "content": "B", "score": 2.0},
                                          {"id": "a", "content": "A", "score": 0.9}]}
    assert screen(SHOWN, Modify({"results": []})).delta == {"results": []}


@pytest.mark.parametrize("delta", [
    {"results": [{"id": "c"}]},                                 # not among the hits
    {"results": [{"id": "a"}, {"id": "a"}]},                    # twice
    {"results": [{"id": "a", "content": "changed"}]},           # content changed
    {"results": [{"id": "a", "namespace": "elsewhere"}]},       # a field it did not have
    {"results": [{"id": "a", "score": "high"}]},                # not a number
    {"results": [{"id": "a", "score": True}]},
    {"results": [{"id": "a"}], "query": "other"},               # more than the results
    {"results": {"id": "a"}},
    {"results": ["a"]},
])
def test_anything_else_is_refused(delta: dict[str, Any]) -> None:
    with pytest.raises(UnsafeReorderError):
        screen(SHOWN, Modify(delta))
