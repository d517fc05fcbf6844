"""Reference hook: expands a recall query with related words from the cortex's own
vocabulary (seed 000, G10).

Events: ``pre_recall`` (Modify: the query with its expansions appended), ``post_store`` and
``post_update`` (Allow; their words join the vocabulary), daemon mode
(``python -m attested_cortex.hooks.reference.expand``; docs/adr/0071). The vocabulary is the
words (3+ letters, no stop words) of the memories this hook has seen: with ``CORTEX_URL``
set it also reads every memory its identity may list (``GET /v1/memories``, in a thread at
start, so it answers at once and expands better as it learns), at most ``EXPAND_MAX_WORDS``
words. Each word's vector is MiniLM's (:mod:`.meaning`), made once. A query word's
expansions are the vocabulary words nearest it (cosine at least ``EXPAND_THRESHOLD``,
default 0.5; at most ``EXPAND_PER_WORD``, default 2, and ``EXPAND_MAX_TERMS`` in all,
default 6), skipping words that only inflect a query word (the full-text search stems
those already). A query whose words one memory holds all of is left alone: full text finds
that memory, and appended words would only dilute the match (bench/quality.py: lexical R@5
0.98 fell to 0.89 when every query was expanded). The hook keeps, for that check, the
numbers of the memories holding each word (updates and deletes are not taken back: a word
a memory lost still counts). "why does the medic ceases the deal?" becomes "... physician
doctor stops halts".

The expanded query reaches both halves of recall: full text finds memories that use the
related word, the vector half embeds the longer query. The caller never sees it (the answer
does not echo the query) and recall's read isolation still decides what is returned; the
vocabulary is whatever this hook's identity can list. No network beyond the cortex itself.
Credentials as :mod:`.autolink`'s (``CORTEX_TOKEN``, ``CORTEX_TOKEN_FILE``,
``CORTEX_AGENT_ID``, ``CORTEX_CA_FILE``).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import urllib.parse
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from attested_cortex.embedding import minilm
from attested_cortex.hooks.reference.autolink import CortexClient
from attested_cortex.hooks.reference.meaning import Vectors
from attested_cortex.hooks.reference.serving import serve
from attested_cortex.hooks.wire import RawHookRequest

DEFAULT_THRESHOLD: Final = 0.5
DEFAULT_PER_WORD: Final = 2
DEFAULT_MAX_TERMS: Final = 6
DEFAULT_MAX_WORDS: Final = 50_000
#: A query longer than recall's own bound is not expanded.
MAX_QUERY: Final = 2000
#: Words sharing this many leading letters with a query word inflect it (skipped).
STEM: Final = 5
PAGE: Final = 500
_WORD: Final = re.compile(r"[a-z]{3,}")
STOP: Final = frozenset("""
the and for are but not you with this that from have was were has had its into our your
their they them there then than what when where which who whom why how can cant could
would should will shall may might must does did doing done about after before over under
again also any all some each every both few more most other such only own same very just
now here out off too yes get got one two per via onto upon lot lots much many let lets
often says say said tell told need needs want wants know use used
""".split())


def words(text: str) -> list[str]:
    """Lower-cased words of 3+ letters, no stop words, in order, each once."""
    return list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in STOP))


class Vocabulary:
    """Words and their vectors, searched by cosine (thread-safe; grows, never shrinks)."""

    def __init__(self, vectors: Vectors, *, max_words: int = DEFAULT_MAX_WORDS) -> None:
        import numpy as np

        self.vectors, self.max_words = vectors, max_words
        self._words: list[str] = []
        self._known: set[str] = set()
        self._matrix = np.empty((1024, minilm.DIMENSION), dtype=np.float32)
        #: Word -> the numbers of the texts (memories) holding it, ascending.
        self._postings: dict[str, array[int]] = {}
        self._texts = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._words)

    def learn(self, texts: Iterable[str]) -> int:
        """Add the new words of ``texts`` (each a memory's); returns how many were added."""
        split = [words(t) for t in texts]
        with self._lock:
            room = self.max_words - len(self._words)
            new = [w for w in dict.fromkeys(w for ws in split for w in ws)
                   if w not in self._known][:max(room, 0)]
        made = self.vectors.embed(new) if new else {}
        with self._lock:
            self._add(new, made)
            for text in split:
                for word in text:
                    if word in self._known:
                        self._postings.setdefault(word, array("I")).append(self._texts)
                self._texts += 1
        return len(new)

    def co_occur(self, asked: Sequence[str]) -> bool:
        """Whether one text learned holds every word of ``asked`` (so full text alone finds
        it, and expanding the query would only dilute that match)."""
        import numpy as np

        with self._lock:
            found = [self._postings.get(w) for w in asked]
            if not asked or any(p is None for p in found):
                return False
            lists = sorted((np.frombuffer(p, dtype=np.uint32) for p in found if p), key=len)
            common = lists[0]
            for more in lists[1:]:
                common = np.intersect1d(common, more, assume_unique=True)
                if not len(common):
                    return False
            return True

    def _add(self, new: Sequence[str], made: Mapping[str, Any]) -> None:
        """Append the words of ``new`` not known yet and their vectors (the lock held)."""
        import numpy as np

        new = [w for w in new if w not in self._known]
        end = len(self._words) + len(new)
        if end > len(self._matrix):
            grown = np.empty((max(end, 2 * len(self._matrix)), self._matrix.shape[1]),
                             dtype=np.float32)
            grown[:len(self._words)] = self._matrix[:len(self._words)]
            self._matrix = grown
        for word in new:
            self._matrix[len(self._words)] = made[word]
            self._words.append(word)
            self._known.add(word)

    def near(self, word: str, vector: Any, *, threshold: float, k: int) -> list[str]:
        """Up to ``k`` vocabulary words nearest ``word`` (its ``vector``) at ``threshold``
        or more, best first, none an inflection of it."""
        with self._lock:
            if not self._words:
                return []
            sims = self._matrix[:len(self._words)] @ vector
            order = sims.argsort()[::-1]
            found: list[str] = []
            for i in order:
                if sims[i] < threshold or len(found) == k:
                    break
                if self._words[i][:STEM] != word[:STEM]:
                    found.append(self._words[i])
            return found


class Expander:
    """Answers ``pre_recall`` with the expanded query; learns from stores and updates."""

    def __init__(self, vocabulary: Vocabulary, *, threshold: float = DEFAULT_THRESHOLD,
                 per_word: int = DEFAULT_PER_WORD, max_terms: int = DEFAULT_MAX_TERMS) -> None:
        self.vocabulary = vocabulary
        self.threshold, self.per_word, self.max_terms = threshold, per_word, max_terms

    def expansions(self, query: str) -> list[str]:
        """The words added to ``query``: each query word's nearest, in query order."""
        asked = words(query)
        if not asked or not len(self.vocabulary):
            return []
        added: list[str] = []
        for word, vector in zip(asked, self.vocabulary.vectors.of(asked), strict=True):
            for near in self.vocabulary.near(word, vector, threshold=self.threshold,
                                             k=self.per_word):
                if all(near[:STEM] != w[:STEM] for w in (*asked, *added)):
                    added.append(near)
        return added[:self.max_terms]

    def decide(self, request: RawHookRequest) -> dict[str, Any]:
        """Modify ``pre_recall``'s query; Allow everything else."""
        if request["event"] != "pre_recall":
            return {"decision": "allow"}
        query = str(request["payload"].get("query", ""))
        if self.vocabulary.co_occur(words(query)):
            return {"decision": "allow"}  # a memory holds every word: full text finds it
        added = self.expansions(query)
        expanded = f"{query} {' '.join(added)}"
        if not added or len(expanded) > MAX_QUERY:
            return {"decision": "allow"}
        return {"decision": "modify", "delta": {"query": expanded}}

    def after(self, request: RawHookRequest) -> None:
        """A stored or updated memory's words join the vocabulary."""
        if request["event"] in ("post_store", "post_update"):
            self.vocabulary.learn(memory_texts([request["payload"]]))


def memory_texts(memories: Iterable[Mapping[str, Any]]) -> list[str]:
    """The title and content of each memory."""
    return [f"{m.get('title') or ''} {m.get('content') or ''}" for m in memories]


def read_all(client: CortexClient, vocabulary: Vocabulary) -> int:
    """Learn the words of every memory the hook may list, page by page; returns the pages."""
    cursor: str | None = None
    pages = 0
    while len(vocabulary) < vocabulary.max_words:
        query = {"limit": PAGE, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/memories?" + urllib.parse.urlencode(query))
        vocabulary.learn(memory_texts(page.get("memories", [])))
        pages += 1
        cursor = page.get("next")
        if not cursor:
            break
    return pages


def main() -> None:
    """Serve on stdio; with ``CORTEX_URL``, read the cortex's vocabulary in a thread."""
    vocabulary = Vocabulary(Vectors(), max_words=int(os.environ.get("EXPAND_MAX_WORDS",
                                                                     DEFAULT_MAX_WORDS)))
    expander = Expander(
        vocabulary, threshold=float(os.environ.get("EXPAND_THRESHOLD", DEFAULT_THRESHOLD)),
        per_word=int(os.environ.get("EXPAND_PER_WORD", DEFAULT_PER_WORD)),
        max_terms=int(os.environ.get("EXPAND_MAX_TERMS", DEFAULT_MAX_TERMS)))
    url = os.environ.get("CORTEX_URL")
    if url:
        client = CortexClient(url, token=os.environ.get("CORTEX_TOKEN"),
                              agent_id=os.environ.get("CORTEX_AGENT_ID"),
                              token_file=os.environ.get("CORTEX_TOKEN_FILE"),
                              ca_file=os.environ.get("CORTEX_CA_FILE"))

        def seed() -> None:
            try:
                pages = read_all(client, vocabulary)
            except (OSError, ValueError) as exc:
                print(f"expand: reading the cortex's memories failed: {exc}", file=sys.stderr)
                return
            print(f"expand: {len(vocabulary)} words from {pages} page(s)", file=sys.stderr)

        threading.Thread(target=seed, name="expand-seed", daemon=True).start()
    serve(expander.decide, after=expander.after)


if __name__ == "__main__":
    main()
