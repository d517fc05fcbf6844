"""The labelled recall set: memories, lexical queries and paraphrase queries, each query
labelled with the one memory it should find. Made here, seeded, never downloaded.

A memory says who did what to what, and when: four slots (subject, action, object, time),
each filled with one concept, each concept written in one of several surface forms that
share no word (``rotates`` / ``renews`` / ``swaps``). Lexical queries are the target's three
rarest words (the case of issue 15's ranking defect). Paraphrase queries name the target's
subject, action and object in other surface forms, so they share no content word with it
(the evaluation checks that with PostgreSQL's own parser and drops any that do).

Callers: bench/quality.py (2,000 memories, 350 queries) and tests/recall/test_quality.py
(a small regression guard).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass

# Each concept: surface forms that share no word with each other.
SUBJECTS = (
    ("the doctor", "the physician", "the medic"),
    ("the lawyer", "the attorney", "the counsel"),
    ("the boss", "the manager", "the supervisor"),
    ("the teacher", "the instructor", "the tutor"),
    ("the customer", "the client", "the buyer"),
    ("the seller", "the vendor", "the supplier"),
    ("the kids", "the children", "the youngsters"),
    ("the server", "the machine", "the host"),
    ("the company", "the firm", "the business"),
    ("the student", "the pupil", "the learner"),
    ("the chef", "the cook", "the kitchen staff"),
    ("the driver", "the chauffeur", "the motorist"),
    ("the accountant", "the bookkeeper", "the auditor"),
    ("the developer", "the programmer", "the coder"),
    ("the nurse", "the caregiver", "the attendant"),
    ("the police", "the officers", "the cops"),
    ("the landlord", "the property owner", "the lessor"),
    ("the team", "the group", "the squad"),
    ("the plumber", "the pipe fitter", "the handyman"),
    ("the bank", "the lender", "the credit union"),
    ("the airline", "the carrier", "the flight operator"),
    ("the dentist", "the orthodontist", "the tooth specialist"),
    ("the neighbor", "the resident next door", "the folks across the street"),
    ("the mayor", "the city council", "the municipal government"),
    ("the author", "the writer", "the novelist"),
)
ACTIONS = (
    ("buys", "purchases", "acquires"),
    ("deletes", "removes", "erases"),
    ("fixes", "repairs", "mends"),
    ("starts", "begins", "launches"),
    ("stops", "halts", "ceases"),
    ("cancels", "calls off", "scraps"),
    ("sends", "ships", "mails"),
    ("checks", "inspects", "examines"),
    ("cleans", "washes", "scrubs"),
    ("hides", "conceals", "stashes"),
    ("sells", "auctions", "trades away"),
    ("lends", "loans", "advances"),
    ("builds", "constructs", "assembles"),
    ("rents", "leases", "hires out"),
    ("delays", "postpones", "defers"),
    ("updates", "refreshes", "modernizes"),
    ("discusses", "talks about", "debates"),
    ("approves", "accepts", "endorses"),
    ("rejects", "declines", "refuses"),
    ("photographs", "films", "snaps pictures of"),
)
OBJECTS = (
    ("the invoices", "the bills", "the receipts"),
    ("the passwords", "the credentials", "the passcodes"),
    ("the furniture", "the chairs and tables", "the couches"),
    ("the groceries", "the food supplies", "the provisions"),
    ("the laptop", "the notebook computer", "the portable PC"),
    ("the garden", "the yard", "the lawn"),
    ("the medicine", "the medication", "the pills"),
    ("the contract", "the agreement", "the deal"),
    ("the luggage", "the suitcases", "the baggage"),
    ("the photos", "the pictures", "the images"),
    ("the tickets", "the passes", "the admission vouchers"),
    ("the budget", "the spending plan", "the finances"),
    ("the shoes", "the sneakers", "the footwear"),
    ("the house", "the home", "the residence"),
    ("the documents", "the paperwork", "the files"),
    ("the bicycle", "the bike", "the cycle"),
    ("the presentation", "the slides", "the talk"),
    ("the wedding", "the marriage ceremony", "the nuptials"),
    ("the vacation", "the holiday", "the getaway"),
    ("the report", "the summary", "the writeup"),
    ("the software", "the program", "the application"),
    ("the packages", "the parcels", "the boxes"),
    ("the salary", "the wages", "the pay"),
    ("the meeting", "the conference", "the gathering"),
    ("the car", "the automobile", "the vehicle"),
)
TIMES = (
    "every Friday after 3pm", "on the first Monday of each month", "nightly at 2am",
    "before each quarterly close", "whenever an incident is declared", "at the end of sprints",
    "during the holiday freeze", "twice a week", "after every major outage",
    "before audits", "on weekends only", "within an hour of a request", "each January",
    "when usage spikes", "after the morning standup", "once a year",
)
REASONS = (
    "to satisfy the compliance checklist", "because a customer asked for it",
    "so storage costs stay low", "after last year's breach", "per the new policy",
    "to keep latency predictable", "as the runbook says", "to avoid overtime",
    "following the board decision", "since the vendor changed terms",
    "for the upcoming certification", "to help the on-call rotation",
)
PREFIXES = ("when does", "how often does", "why does", "does", "who says")


@dataclass(frozen=True)
class Memory:
    key: int
    content: str
    concepts: tuple[int, int, int, int]


@dataclass(frozen=True)
class Query:
    kind: str  # "lexical" or "paraphrase"
    text: str
    target: int  # Memory.key


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def build(*, memories: int = 2000, lexical: int = 150, paraphrase: int = 200,
          seed: int = 15) -> tuple[list[Memory], list[Query]]:
    """A seeded set: ``memories`` memories with distinct (subject, action, object) triples,
    and queries whose targets are drawn from them."""
    rng = random.Random(seed)
    triples: set[tuple[int, int, int]] = set()
    while len(triples) < memories:
        triples.add((rng.randrange(len(SUBJECTS)), rng.randrange(len(ACTIONS)),
                     rng.randrange(len(OBJECTS))))
    out: list[Memory] = []
    forms: dict[int, tuple[int, int, int]] = {}
    for key, (s, a, o) in enumerate(sorted(triples, key=lambda t: rng.random())):
        fs, fa, fo = rng.randrange(2), rng.randrange(2), rng.randrange(2)
        when = rng.randrange(len(TIMES))
        content = (f"{SUBJECTS[s][fs][0].upper()}{SUBJECTS[s][fs][1:]} {ACTIONS[a][fa]} "
                   f"{OBJECTS[o][fo]} {TIMES[when]} {rng.choice(REASONS)}.")
        out.append(Memory(key, content, (s, a, o, when)))
        forms[key] = (fs, fa, fo)
    df = Counter(w for m in out for w in _words(m.content))
    queries: list[Query] = []
    for m in rng.sample(out, lexical):
        rarest = sorted(_words(m.content), key=lambda w: (df[w], w))[:3]
        queries.append(Query("lexical", " ".join(rarest), m.key))
    for m in rng.sample(out, paraphrase):
        s, a, o, _ = m.concepts
        fs, fa, fo = forms[m.key]
        ps = pa = po = 2  # the wording no memory uses
        text = (f"{rng.choice(PREFIXES)} {SUBJECTS[s][ps]} {ACTIONS[a][pa]} "
                f"{OBJECTS[o][po]}?")
        queries.append(Query("paraphrase", text, m.key))
    return out, queries


def overlap_problems() -> list[str]:
    """Surface forms of one concept that share a word (the set's own sanity check)."""
    stop = {"the", "a", "an", "of", "up", "down", "on", "off"}
    problems = []
    for table in (SUBJECTS, ACTIONS, OBJECTS):
        for forms in table:
            for i, x in enumerate(forms):
                for y in forms[i + 1:]:
                    shared = (_words(x) & _words(y)) - stop
                    if shared:
                        problems.append(f"{x!r} / {y!r}: {sorted(shared)}")
    return problems
