"""bench/replay.py's passage-level BM25 (ADR 0146): a memory is cut into windows of
``width`` positions ``stride`` apart, and scored by its best window with the windows' own
statistics. What ADR 0146 measured rests on each occurrence landing in exactly the windows
that cover its position, and on a memory whose query words sit together outscoring one where
the same words lie far apart."""

from __future__ import annotations

from bench.replay import Windows


def filler(memory: str, length: int, skip: set[int]) -> list[tuple[str, str, list[int]]]:
    """A word of its own at every position of ``memory`` but ``skip``."""
    return [(memory, f"{memory}{p}", [p]) for p in range(1, length + 1) if p not in skip]


def test_an_occurrence_lands_in_every_window_covering_its_position() -> None:
    rows = [*filler("a", 250, {1, 120, 250}), ("a", "x", [1, 120, 250]),
            *filler("b", 30, set())]
    w = Windows(["a", "b"], rows, width=100, stride=50)

    # a: 1-100, 51-150, 101-200, 151-250; b (30 positions): one window
    assert list(w.owner) == [0, 0, 0, 0, 1]
    idx, tf = w.postings["x"]
    assert dict(zip(idx.tolist(), tf.tolist(), strict=True)) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
    assert w.length.tolist() == [100, 100, 100, 100, 30]


def test_words_close_together_outscore_the_same_words_far_apart() -> None:
    together = [*filler("t", 300, {10, 12}), ("t", "alpha", [10]), ("t", "beta", [12])]
    apart = [*filler("f", 300, {10, 290}), ("f", "alpha", [10]), ("f", "beta", [290])]
    w = Windows(["t", "f"], together + apart, width=100, stride=50)

    best = w.best(["alpha", "beta"])
    assert best[0] > best[1] > 0
    assert w.best(["nowhere"]).tolist() == [0.0, 0.0]
