"""The token budget fills greedily in rank order and says when it dropped something."""

import uuid
from datetime import UTC, datetime

from attested_cortex.service.resources.recall import apply_budget, estimate_tokens
from attested_cortex.store.memories import Memory
from attested_cortex.store.recall import Hit


def hit(chars: int, score: float) -> Hit:
    now = datetime.now(UTC)
    memory = Memory(uuid.uuid4(), "n", "", "x" * chars, (), {}, "a", 1, now, now, None)
    return Hit(memory, score)


def test_no_budget_keeps_everything() -> None:
    hits = [hit(40, 0.9), hit(40, 0.8)]
    result = apply_budget(hits, None)
    assert list(result.hits) == hits and not result.truncated and result.tokens == 20


def test_budget_skips_what_does_not_fit_and_fills_with_smaller() -> None:
    big, small1, small2 = hit(400, 0.9), hit(40, 0.8), hit(40, 0.7)
    result = apply_budget([big, small1, small2], 25)
    assert list(result.hits) == [small1, small2]
    assert result.truncated and result.tokens == 20


def test_estimate_is_at_least_one_token() -> None:
    assert estimate_tokens(hit(0, 0.1)) == 1
