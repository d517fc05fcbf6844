"""The deep audit: every memory, link and transcript row against its latest write record in
the chain, and every agent's stored-bytes counter against the sum of its rows.

Called by ``cortexctl audit verify --deep`` and ``GET /v1/audit/verify?deep=true`` after the
chain itself verified. The chain says which writes the server made; this module says whether
the rows still hold what those writes left. A mismatch is reported by id:

``changed``        the row differs from its latest record (``fields`` names what); for a
                   sealed memory also ``search``: its blind search tokens are not the ones
                   its text gives under its key version (re-derived with the key: copied
                   tokens would make recall return it for another memory's words)
``downgraded``     a link claims less attestation than it was recorded with, or lost its
                   signature
``missing_event``  a row without any record: written behind the server (or before
                   migration 0006 added write records)
``missing_row``    a record whose row is gone
``unreadable``     a record event whose payload is not a record (forged by hand)
``miscounted``     (kind ``usage``, id the agent) an agent's stored-bytes counter differs from
                   the recomputed sum of its rows (``fields``: ``memories``, ``transcripts``):
                   the counter table or a row was edited behind the server's triggers
                   (``spoke``: the spoke-memory tables' bytes, migration 0032)

The spoke-memory family's grants, receipts, spaces, subjects, candidates and record side
rows (placement: who may read a record) are compared with the rows its op records left
(kinds ``grant``, ``receipt``, ``space``, ``subject``, ``candidate``, ``record``; what each
covers: :mod:`.spoke_records`, ADR 0067, ADR 0087).

With the keyed chain (:mod:`.sealing`), a record event appended without the master key
(``distrusted``: the keyed walk's faults) is no record at all: a row is compared with its
latest *sealed* record, so a row changed together with a forged matching record is named
``changed`` (against the record it had) or ``missing_event``.

A transcript's latest record is its store, archive or prune: a frame the sweeper pruned
matches its ``transcript.pruned`` record (frame digest null), one dropped behind the server
does not.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from attested_cortex.attest.cbor import CborValue
from attested_cortex.attest.decoding import decode
from attested_cortex.attest.records import (
    LINK_EVENTS,
    MEMORY_EVENTS,
    TRANSCRIPT_EVENTS,
    differing,
    downgraded,
    link_record,
    memory_record,
    transcript_record,
)
from attested_cortex.attest.spoke_records import (
    BUILDERS,
    DEFAULTS,
    EVENT_PREFIX,
    SPOKE_KINDS,
    SpokeKind,
    key_of,
    recorded_rows,
)
from attested_cortex.errors import InvalidInputError
from attested_cortex.store import memory_resealing, scanning, usage
from attested_cortex.store.database import Conn
from attested_cortex.store.memories import Memory

Problem = Literal["changed", "downgraded", "missing_event", "missing_row", "unreadable",
                  "miscounted"]
Kind = Literal["memory", "link", "transcript", "usage", "grant", "receipt", "space",
               "subject", "candidate", "record"]
#: Each kind's record events and the record field naming its row.
_KEYS: dict[str, tuple[Kind, str]] = {
    **{e: ("memory", "memory_id") for e in MEMORY_EVENTS},
    **{e: ("link", "link_id") for e in LINK_EVENTS},
    **{e: ("transcript", "transcript_id") for e in TRANSCRIPT_EVENTS},
}
#: Mismatches listed in a report; the counts always cover all of them.
MAX_LISTED = 1000
#: Sealed memories whose search vectors are re-derived per round trip.
SEARCH_BATCH = 500


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One row (or record) that does not match."""

    kind: Kind
    id: str
    problem: Problem
    fields: tuple[str, ...] = ()
    sequence: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "problem": self.problem,
                "fields": list(self.fields), "sequence": self.sequence}


@dataclass
class SweepReport:
    """What the sweep found (``mismatches`` capped at :data:`MAX_LISTED`)."""

    memories: int = 0
    links: int = 0
    transcripts: int = 0
    records: int = 0
    agents: int = 0
    #: spoke-memory rows compared with their op records (ADR 0067), by kind
    spoke: dict[str, int] = field(default_factory=dict)
    mismatch_count: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    #: record side rows without any record (``missing_event``), listed or not: a bundle of
    #: a build before the ``record`` kind has only these (bundles/importing.py)
    unrecorded_records: int = 0

    @property
    def ok(self) -> bool:
        return self.mismatch_count == 0

    def add(self, mismatch: Mismatch) -> None:
        self.mismatch_count += 1
        if mismatch.kind == "record" and mismatch.problem == "missing_event":
            self.unrecorded_records += 1
        if len(self.mismatches) < MAX_LISTED:
            self.mismatches.append(mismatch)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "memories": self.memories, "links": self.links,
                "transcripts": self.transcripts, "records": self.records,
                "agents": self.agents, "spoke": dict(self.spoke),
                "mismatch_count": self.mismatch_count,
                "mismatches": [m.as_json() for m in self.mismatches],
                "truncated": self.mismatch_count > len(self.mismatches)}


Latest = dict[str, tuple[int, dict[str, CborValue]]]


async def sweep(conn: Conn, distrusted: Collection[int] = frozenset()) -> SweepReport:
    """Compare every row with its latest record, in one consistent snapshot; records at the
    ``distrusted`` sequences (appended without the key) are not believed."""
    report = SweepReport()
    async with scanning.snapshot(conn):
        latest = await _latest_records(conn, report, distrusted)
        batch: list[Memory] = []
        async for memory, signature in scanning.memories(conn):
            report.memories += 1
            _compare(report, "memory", str(memory.id), memory_record(memory, signature),
                     latest["memory"])
            batch.append(memory)
            if len(batch) >= SEARCH_BATCH:
                await _check_searches(conn, report, batch)
                batch = []
        await _check_searches(conn, report, batch)
        async for link in scanning.links(conn):
            report.links += 1
            _compare(report, "link", str(link.id), link_record(link), latest["link"])
        async for transcript in scanning.transcripts(conn):
            report.transcripts += 1
            _compare(report, "transcript", str(transcript.transcript.id),
                     transcript_record(transcript), latest["transcript"])
        report.agents, miscounts = await usage.recounted(conn)
        for wrong in miscounts:
            fields = tuple(kind for kind in ("memories", "transcripts", "spoke")
                           if getattr(wrong.counted, kind) != getattr(wrong.recounted, kind))
            report.add(Mismatch("usage", wrong.agent, "miscounted", fields))
        await _sweep_spoke(conn, report, distrusted)
    for kind, left in latest.items():
        for key, (sequence, _) in sorted(left.items(), key=lambda item: item[1][0]):
            report.add(Mismatch(kind, key, "missing_row", sequence=sequence))
    return report


async def _check_searches(conn: Conn, report: SweepReport, batch: list[Memory]) -> None:
    """Name each sealed memory whose blind search tokens are not its text's (re-derived:
    no record covers them; needs the key, so only a server's or a keyed run's sweep)."""
    for memory_id in await memory_resealing.searches_unlike_text(conn, batch):
        report.add(Mismatch("memory", str(memory_id), "changed", ("search",)))


async def _latest_records(conn: Conn, report: SweepReport,
                          distrusted: Collection[int]) -> dict[Kind, Latest]:
    latest: dict[Kind, Latest] = {"memory": {}, "link": {}, "transcript": {}}
    async for sequence, event_type, payload in scanning.records(conn, tuple(_KEYS)):
        if sequence in distrusted:
            continue
        report.records += 1
        kind, key_field = _KEYS[event_type]
        try:
            value = decode(payload)
        except InvalidInputError:
            value = None
        if not isinstance(value, dict) or not isinstance(value.get(key_field), str):
            report.add(Mismatch(kind, f"event:{sequence}", "unreadable", sequence=sequence))
            continue
        latest[kind][str(value[key_field])] = (sequence, value)
    return latest


def _compare(report: SweepReport, kind: Kind, key: str,
             expected: dict[str, CborValue], latest: Latest) -> None:
    found = latest.pop(key, None)
    if found is None:
        report.add(Mismatch(kind, key, "missing_event"))
        return
    sequence, recorded = found
    fields = differing(expected, recorded)
    if not fields:
        return
    problem: Problem = "downgraded" if kind == "link" and downgraded(expected, recorded) \
        else "changed"
    report.add(Mismatch(kind, key, problem, tuple(fields), sequence))


async def _sweep_spoke(conn: Conn, report: SweepReport, distrusted: Collection[int]) -> None:
    """The spoke-memory rows against the latest record of each in the op records: grants and
    receipts must have one; a space or subject without one must hold the defaults. A record
    whose row is gone is named ``missing_row``, its space here or not: a logical bundle
    carries every spoke-memory table (ADR 0085), so a whole space gone is a deletion too.
    No op removes a space, so a space any op record names must have a row, even one whose
    row no record covers (it held the defaults)."""
    latest: dict[SpokeKind, Latest] = {kind: {} for kind in SPOKE_KINDS}
    named: dict[str, int] = {}  # space id -> the first op record naming it
    async for sequence, _, payload in scanning.prefixed_records(conn, EVENT_PREFIX):
        if sequence in distrusted:
            continue
        report.records += 1
        try:
            value = decode(payload)
            if isinstance(value, dict) and isinstance(value.get("space_id"), str):
                named.setdefault(str(value["space_id"]), sequence)
            found = recorded_rows(value)
            for kind, record in found or ():
                latest[kind][key_of(kind, record)] = (sequence, record)
        except (InvalidInputError, KeyError):
            found = None
        if found is None:
            report.add(Mismatch("receipt", f"event:{sequence}", "unreadable",
                                sequence=sequence))
    for kind in ("space", "grant", "receipt", "subject", "candidate", "record"):
        count = 0
        async for row in scanning.spoke_rows(conn, kind):
            count += 1
            expected = BUILDERS[kind](row)
            key = key_of(kind, expected)
            if kind == "space":
                named.pop(key, None)
            if kind in DEFAULTS and key not in latest[kind]:
                fields = differing({**expected, **DEFAULTS[kind]}, expected)
                if fields:
                    report.add(Mismatch(kind, key, "missing_event", tuple(fields)))
                continue
            _compare(report, kind, key, expected, latest[kind])
        report.spoke[kind] = count
    for key in latest["space"]:  # named below by its own record
        named.pop(key, None)
    for kind in SPOKE_KINDS:
        for key, (sequence, _) in sorted(latest[kind].items(), key=lambda i: i[1][0]):
            report.add(Mismatch(kind, key, "missing_row", sequence=sequence))
    for key, sequence in sorted(named.items(), key=lambda item: item[1]):
        report.add(Mismatch("space", key, "missing_row", sequence=sequence))
