"""A held-out paraphrase set: hand-written memories of the kind agents store (team habits,
systems, people, decisions) and, for each, a question a person would ask that shares no
content word with it. Not generated from bench/qualityset.py's vocabulary and never used to
tune anything: it says whether a model's gain on the synthetic set carries over.

bench/quality.py stores these memories among the synthetic ones (as distractors) and scores
the paraphrase questions, and a lexical query per memory (its three longest words), beside
the synthetic queries. Questions that share a lexeme with their target after all (PostgreSQL's
own parser decides) are dropped and counted, as for the synthetic set.
"""

from __future__ import annotations

from bench.qualityset import Memory, Query

#: Memory keys start here, clear of the synthetic set's.
KEY_BASE = 1_000_000

PAIRS: tuple[tuple[str, str], ...] = (
    ("Deploys freeze on Fridays after 3pm.", "when can't we ship?"),
    ("The billing service reads from the replica in eu-west-1.",
     "where do invoices get their data?"),
    ("Maria is allergic to peanuts, so order lunch without nuts.",
     "what food should we avoid for the team meal?"),
    ("The staging database password rotates every thirty days.",
     "how often do credentials for the test environment change?"),
    ("Our on-call rotation switches owners each Monday morning.",
     "when does the pager go to someone new?"),
    ("Customer refunds above 500 euros need approval from finance.",
     "who must sign off on large money-back requests?"),
    ("The office closes early on the last working day of December.",
     "do we leave sooner before new year?"),
    ("Kubernetes nodes are patched on the second Tuesday of each month.",
     "when are cluster machines updated?"),
    ("Tom prefers tea, never coffee, in meetings.",
     "what hot drink should I bring him?"),
    ("The mobile app crashes when the phone language is set to Arabic.",
     "why does the application fail for right-to-left users?"),
    ("Invoices are sent to clients on the first business day of the month.",
     "when do customers receive their bills?"),
    ("Backups of the orders table are kept for ninety days.",
     "how long do we retain copies of purchase records?"),
    ("The CEO wants weekly status reports by Thursday noon.",
     "when is the update for the chief executive due?"),
    ("Latency spikes happen when the cache is flushed at midnight.",
     "why is the site slow around 12am?"),
    ("New hires get their laptops from IT on their first day.",
     "when do recruits receive computers?"),
    ("The marketing budget was cut by twenty percent this quarter.",
     "did advertising spending shrink?"),
    ("The coffee machine on floor three is broken.",
     "where can't I get an espresso?"),
    ("Anna speaks fluent Japanese and helps with Tokyo clients.",
     "who can translate for customers in Japan?"),
    ("Logs older than two weeks are deleted automatically.",
     "how long is diagnostic output retained?"),
    ("The API rate limit is one hundred requests per minute per token.",
     "how many calls can a key make each sixty seconds?"),
    ("Parking in the garage requires a badge after 6pm.",
     "do I need an access card to leave my car at night?"),
    ("Security reviews are mandatory before any public launch.",
     "what must happen prior to releasing something to everyone?"),
    ("The search index is rebuilt every night at 2am.",
     "when does the lookup catalogue get regenerated?"),
    ("Our biggest customer, Acme, renews its contract in June.",
     "when is the largest account's agreement up for extension?"),
    ("The fire drill is scheduled for next Wednesday morning.",
     "when is the evacuation practice?"),
    ("John is on paternity leave until March.",
     "why is he away from work with his newborn?"),
    ("Pull requests need two approvals before merging.",
     "how many reviewers must accept a code change?"),
    ("The printer on the second floor jams with thick paper.",
     "which device struggles with heavy cardstock?"),
    ("Salaries are paid on the 25th of every month.",
     "when do employees get their wages?"),
    ("The VPN disconnects if you are idle for thirty minutes.",
     "why does the remote network connection drop after half an hour?"),
    ("Our warehouse in Rotterdam ships European orders.",
     "where are parcels for EU buyers dispatched from?"),
    ("The conference room projector needs an HDMI adapter.",
     "what cable do I need to present slides in the meeting space?"),
    ("Passwords must contain at least fourteen characters.",
     "how long should a login secret be?"),
    ("The quarterly board meeting moved to video calls.",
     "is the directors' gathering held online now?"),
    ("Support tickets marked urgent must be answered within one hour.",
     "how fast do we respond to critical help requests?"),
    ("The elevator is out of service for repairs this week.",
     "can I take the lift today?"),
    ("Free pizza is served in the kitchen every Friday afternoon.",
     "when is there complimentary food at the office?"),
    ("Our test suite takes forty minutes to run in CI.",
     "how slow are the automated checks in the pipeline?"),
    ("The team celebrates birthdays with cake in the break room.",
     "how do colleagues mark someone getting a year older?"),
    ("Visitors must sign in at reception and wear a guest badge.",
     "what do external guests do when they arrive?"),
)


def build() -> tuple[list[Memory], list[Query]]:
    """The held-out memories and their queries (lexical and paraphrase), keys from
    :data:`KEY_BASE`."""
    memories: list[Memory] = []
    queries: list[Query] = []
    for i, (content, question) in enumerate(PAIRS):
        key = KEY_BASE + i
        memories.append(Memory(key, content, (-1, -1, -1, -1)))
        queries.append(Query("paraphrase", question, key))
        longest = sorted({w.strip(".,") for w in content.split()}, key=lambda w: (-len(w), w))
        queries.append(Query("lexical", " ".join(longest[:3]), key))
    return memories, queries
