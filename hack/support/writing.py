"""A client that writes at a steady rate and remembers every acknowledged write.

Callers: e2e/test_ha.py (failover without loss) and bench/ha.py (unavailability per failover).
It is what an agent does during a database failover: write, and when the cortex answers a
retryable failure (503, or the connection or the answer lost), send the *same* write again with
the same ``Idempotency-Key`` after the answer's ``Retry-After`` (else a short pause) until it is
acknowledged (201); one write at a time. Every write has
its own key and its own content, so afterwards the cortex must hold each acknowledged id, and
each content exactly once (a retry whose first attempt had committed must not store twice).
Besides a memory per slot, the writer may link the last two acknowledged memories every
``links_every`` slots and store a transcript every ``transcripts_every`` (its metadata names
its key, so a duplicate is found by it): the three writes a failover must not lose.

:class:`Ledger` is the record (pure: appended to by the writer thread, read afterwards);
:func:`longest_gap` and :func:`gap_around` turn it into the unavailability figures.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Statuses after which the same write is sent again (the cortex said "not done, retry").
RETRYABLE = frozenset({502, 503, 504})
#: A 409 with this code is "the first attempt with this key is still in flight; retry"
#: (service/idempotency.py); any other 409 is final.
IN_FLIGHT = "idempotency_key_in_use"
#: Between two attempts of one write: short against a failover, long against a busy loop.
RETRY_PAUSE_S = 0.2
ATTEMPT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Ack:
    """One acknowledged write: its key, the id the cortex gave, when it was sent and answered;
    ``kind`` is memory, link or transcript."""

    key: str
    content: str
    object_id: str
    first_sent: float
    acked: float
    attempts: int
    kind: str = "memory"


@dataclass
class Ledger:
    """Everything the writer saw, in monotonic seconds."""

    acks: list[Ack] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)  # (when, status or error)
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def retried(self) -> int:
        return sum(a.attempts - 1 for a in self.acks)

    def of(self, kind: str) -> list[Ack]:
        """The acknowledged writes of one kind (memory, link, transcript)."""
        return [a for a in list(self.acks) if a.kind == kind]


def _answer_name(status: int, answer: Any) -> str:
    """``201``, or the status with the error's code (``503 database_failover``)."""
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return f"{status} {code}" if code else str(status)


def _in_flight(status: int, answer: Any) -> bool:
    error = answer.get("error") if isinstance(answer, dict) else None
    return status == 409 and isinstance(error, dict) and error.get("code") == IN_FLIGHT


def longest_gap(acks: list[Ack], *, start: float | None = None) -> tuple[float, float, float]:
    """The longest time between two consecutive acknowledgements: (seconds, last before, first
    after); with ``start``, only gaps ending after it count."""
    times = sorted(a.acked for a in acks)
    best = (0.0, 0.0, 0.0)
    for before, after in itertools.pairwise(times):
        if start is not None and after < start:
            continue
        if after - before > best[0]:
            best = (after - before, before, after)
    return best


def gap_around(acks: list[Ack], moment: float) -> float:
    """Last acknowledgement at or before ``moment`` to the first after it (the issue's gap)."""
    times = sorted(a.acked for a in acks)
    before = max((t for t in times if t <= moment), default=moment)
    after = min((t for t in times if t > moment), default=moment)
    return after - before


#: (status, JSON answer, the Retry-After seconds it named or None).
Answer = tuple[int, Any, float | None]
Post = Callable[[str, dict[str, Any], dict[str, str]], Answer]


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def http_post(base: Callable[[], str], token: str) -> Post:
    """A POST through urllib to the cortex at ``base()`` (re-read each time: a forward moves)."""

    def post(path: str, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        request = urllib.request.Request(
            base() + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                     **headers})
        try:
            with urllib.request.urlopen(request, timeout=ATTEMPT_TIMEOUT_S) as answer:
                return answer.status, json.loads(answer.read() or b"null"), None
        except urllib.error.HTTPError as error:
            after = _retry_after(error.headers.get("Retry-After"))
            try:
                return error.code, json.loads(error.read() or b"null"), after
            except ValueError:
                return error.code, None, after

    return post


class SteadyWriter:
    """A thread storing ``rate`` memories a second into ``namespace`` until stopped (and a
    link every ``links_every`` of them, a transcript every ``transcripts_every``; 0: none)."""

    def __init__(self, post: Post, *, namespace: str, prefix: str, rate: float = 5.0,
                 links_every: int = 0, transcripts_every: int = 0) -> None:
        self.post = post
        self.namespace = namespace
        self.prefix = prefix
        self.interval = 1.0 / rate
        self.links_every = links_every
        self.transcripts_every = transcripts_every
        self.ledger = Ledger()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{prefix}", daemon=True)

    def start(self) -> SteadyWriter:
        self._thread.start()
        return self

    def stop(self) -> Ledger:
        self._stop.set()
        self._thread.join(timeout=ATTEMPT_TIMEOUT_S * 3)
        return self.ledger

    def __enter__(self) -> SteadyWriter:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def acked_since(self, moment: float) -> int:
        return sum(1 for a in list(self.ledger.acks) if a.acked > moment)

    def _run(self) -> None:
        number = 0
        next_slot = time.monotonic()
        while not self._stop.is_set():
            self._stop.wait(max(0.0, next_slot - time.monotonic()))  # the steady rate's pace
            if self._stop.is_set():
                return
            self._write(number)
            number += 1
            next_slot = max(next_slot + self.interval, time.monotonic())

    def _write(self, number: int) -> None:
        key = f"{self.prefix}-{number}"
        content = f"{self.prefix} acknowledged write number {number}"
        self._send("/v1/memories", {"namespace": self.namespace, "content": content}, key,
                   content, "memory")
        memories = self.ledger.of("memory")
        if self.links_every and number % self.links_every == 0 and len(memories) >= 2:
            src, dst = memories[-2].object_id, memories[-1].object_id
            self._send("/v1/links", {"src_id": src, "dst_id": dst, "relation": "related_to"},
                       f"{key}-link", f"{src}->{dst}", "link")
        if self.transcripts_every and number % self.transcripts_every == 0:
            self._send("/v1/transcripts", {
                "namespace": self.namespace, "metadata": {"write": f"{key}-transcript"},
                "content": f"user: {content}?\nagent: kept.\n"},
                f"{key}-transcript", f"{key}-transcript", "transcript")

    def _send(self, path: str, body: dict[str, Any], key: str, content: str, kind: str) -> None:
        """Send one write until acknowledged (or refused for good, or the writer stops)."""
        first, attempts = time.monotonic(), 0
        while not self._stop.is_set() or attempts == 0:
            attempts += 1
            pause = RETRY_PAUSE_S
            try:
                status, answer, after = self.post(path, body, {"Idempotency-Key": key})
            except (OSError, ValueError) as error:  # refused, reset, timed out: ambiguous
                self.ledger.statuses[type(error).__name__] += 1
                self.ledger.failures.append((time.monotonic(), type(error).__name__))
            else:
                self.ledger.statuses[_answer_name(status, answer)] += 1
                if status == 201:
                    self.ledger.acks.append(Ack(key, content, str(answer["id"]), first,
                                                time.monotonic(), attempts, kind))
                    return
                self.ledger.failures.append((time.monotonic(), _answer_name(status, answer)))
                if status not in RETRYABLE and not _in_flight(status, answer):
                    return  # refused for good (counted): not a write the cortex holds
                pause = after if after is not None else pause  # the server's Retry-After
            self._stop.wait(pause)  # the client's retry pause


@dataclass(frozen=True)
class Tally:
    """What the cortex holds against what was acknowledged."""

    acknowledged: int
    missing: list[str]          # acknowledged ids the cortex does not hold
    duplicated: dict[str, int]  # contents stored more than once, with their counts

    @property
    def clean(self) -> bool:
        return not self.missing and not self.duplicated


def tally(ledger: Ledger, held: list[dict[str, Any]], kind: str = "memory") -> Tally:
    """Compare the acknowledged writes of ``kind`` with the objects found afterwards (id, and
    what tells one write from another: a memory's content, a transcript's key, a link's ends)."""
    acks = ledger.of(kind)
    ids = {str(m["id"]) for m in held}
    counts = Counter(str(m["content"]) for m in held)
    return Tally(acknowledged=len(acks),
                 missing=[a.object_id for a in acks if a.object_id not in ids],
                 duplicated={c: n for c, n in counts.items() if n > 1})


def list_namespace(get: Callable[[str], tuple[int, Any]], namespace: str) -> list[dict[str, Any]]:
    """Every live memory of ``namespace``, through the cursor paging of GET /v1/memories."""
    out: list[dict[str, Any]] = []
    cursor = ""
    while True:
        path = f"/v1/memories?namespace={namespace}&limit=500"
        status, page = get(path + (f"&cursor={cursor}" if cursor else ""))
        if status != 200:
            raise AssertionError(f"GET {path} answered {status}: {page}")
        out.extend(page["memories"])
        cursor = page.get("next") or ""
        if not cursor:
            return out
