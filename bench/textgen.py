"""A seeded generator of varied, realistic-looking memory text.

Words come from a fixed vocabulary of common English function words plus a few thousand
content words built from syllables, drawn with a Zipf distribution (a few words are very
common, most are rare), as in real text. The same seed always gives the same corpus, so
benchmark runs compare.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

FUNCTION_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "more will about can other its into than some could them only these two may then do "
    "first any my now such like our over also new after should most where"
).split()
DOMAIN_WORDS = (
    "database cluster deploy rollback incident latency query index migration schema secret "
    "token rotation agent memory recall graph link namespace policy permission audit review "
    "release backup restore replica primary failover network timeout retry queue worker "
    "customer invoice payment refund contract meeting decision roadmap budget forecast "
    "kubernetes operator container image registry volume storage snapshot encryption key "
    "certificate renewal alert dashboard metric trace log error warning bug fix test build"
).split()
_SYLLABLES = ("ka ri mo ten sul vor pan el dri ost qua lim ber nox tav ges ul fin ram "
              "sko pre dem ith cor val").split()


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words = set(DOMAIN_WORDS)
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered


class TextGenerator:
    """Seeded memories: titles, contents, tags and namespaces."""

    def __init__(self, seed: int = 7, vocabulary: int = 20000) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng, vocabulary)
        weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(self.words))]
        self._cum = list(_accumulate(weights))
        teams = ["platform", "payments", "search", "ml", "infra", "support", "security"]
        projects = ["alpha", "beta", "gamma", "delta", "omega"]
        self.namespaces = [f"org/{t}/{p}" for t in teams for p in projects]
        self.namespaces += [f"org/{t}" for t in teams] + ["org"]

    def word(self) -> str:
        """One content word, Zipf-distributed."""
        return self.rng.choices(self.words, cum_weights=self._cum)[0]

    def sentence(self) -> str:
        """A sentence of 6..18 words mixing function and content words."""
        parts = [self.rng.choice(FUNCTION_WORDS) if self.rng.random() < 0.4 else self.word()
                 for _ in range(self.rng.randint(6, 18))]
        return " ".join(parts).capitalize() + "."

    def memory(self) -> dict[str, object]:
        """One memory body for ``POST /v1/memories``."""
        return {
            "namespace": self.rng.choice(self.namespaces),
            "title": " ".join(self.word() for _ in range(self.rng.randint(2, 6))),
            "content": " ".join(self.sentence() for _ in range(self.rng.randint(1, 6))),
            "tags": [self.word() for _ in range(self.rng.randint(0, 4))],
        }

    def memories(self, count: int) -> Iterator[dict[str, object]]:
        """``count`` memories."""
        for _ in range(count):
            yield self.memory()

    def query(self) -> str:
        """A 1..3-word natural query, words drawn like the corpus (common ones dominate)."""
        return " ".join(self.word() for _ in range(self.rng.choice([1, 2, 2, 3, 3])))


def _accumulate(values: list[float]) -> Iterator[float]:
    total = 0.0
    for value in values:
        total += value
        yield total
