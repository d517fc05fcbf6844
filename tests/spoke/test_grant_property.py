"""The grant property of the spoke-memory family (issue 28), as a Hypothesis state machine
against a real ``cortexctl serve`` with token authentication and PostgreSQL: random
interleavings of grant, revoke, capture, review, create, update, delete, get, list,
recall, freeze and fence by several principals. The test keeps its own model of the live
grants (coverage written here again, independently of ``spoke/coverage.py``), records,
candidates, freeze and fences, and checks after every step:

- a principal never reads or writes outside its live grants: a write succeeds only when the
  model says its grants cover it (and it succeeds when they do and nothing else stops it);
  a get answers the record exactly when ``records_read`` covers it; a listing shows exactly
  the live records ``records_read`` covers, a recall only those ``recall`` covers;
- a grant issued by a principal lies within one of its own live ``grants`` grants.

Each run uses a space of its own; the counts are fixed so the module stays near 15 s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import hypothesis.strategies as st
import pytest
import requests
from hack.support.pgservers import PgServer
from hack.support.served import serve
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from psycopg import sql

from attested_cortex.server.tokens import generate
from tests.spoke.test_dispatch_api import OWNER

RUNS = 20
STEPS = 25
PRINCIPALS = ("p1", "p2", "p3")
CAPS = ("records_read", "records_write", "capture", "review", "recall", "grants")
SUBJECTS = ("s1", "s2")
CONTEXTS = ("c1", "c2")
Placement = str | None  # a context id, None: shared


@dataclass
class Grant:
    id: str
    issuer: str
    to: str
    caps: frozenset[str]
    subjects: frozenset[str] | None
    contexts: frozenset[str] | None
    shared: bool
    live: bool = True

    def covers(self, cap: str, subject: str, placement: Placement) -> bool:
        if not self.live or cap not in self.caps:
            return False
        if self.subjects is not None and subject not in self.subjects:
            return False
        if placement is None:
            return self.shared
        return self.contexts is None or placement in self.contexts

    def contains(self, other: Grant) -> bool:
        def within(outer: frozenset[str] | None, inner: frozenset[str] | None) -> bool:
            return outer is None or (inner is not None and inner <= outer)
        return (other.caps <= self.caps and within(self.subjects, other.subjects)
                and within(self.contexts, other.contexts) and (self.shared or not other.shared))


@dataclass
class Record:
    id: str
    subject: str
    placement: Placement
    revision: int = 1
    deleted: bool = False


@dataclass
class Candidate:
    id: str
    subject: str
    scope: Placement
    pending: bool = True


@dataclass
class Model:
    grants: list[Grant] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    frozen: bool = False
    fenced: set[str] = field(default_factory=set)  # subjects
    fenced_contexts: set[tuple[str, str]] = field(default_factory=set)

    def covers(self, who: str, cap: str, subject: str, placement: Placement) -> bool:
        return who == "owner" or any(g.to == who and g.covers(cap, subject, placement)
                                     for g in self.grants)

    def writable(self, subject: str, placement: Placement) -> bool:
        return not self.frozen and subject not in self.fenced and (
            placement is None or (subject, placement) not in self.fenced_contexts)


@pytest.fixture(scope="module")
def served(pg15_server: PgServer, pg15_template: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    import psycopg

    name = "spoke_property_db"
    with psycopg.connect(pg15_server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(pg15_template)))
    workdir: Path = tmp_path_factory.mktemp("spoke-property")
    tokens, lines = {}, []
    for who, scopes in (("owner", OWNER), *((p, "") for p in PRINCIPALS)):
        token, digest = generate()
        tokens[who] = token
        lines.append(f"{digest} {who} {scopes}".strip())
    (workdir / "tokens").write_text("\n".join(lines) + "\n")
    (workdir / "serve.yaml").write_text("quotas:\n  enabled: false\n")
    with serve(pg15_server.dsn(name), workdir, "--auth", "tokens", "--tokens-file",
               str(workdir / "tokens"), "--graph-backend", "CTE",
               "--config", str(workdir / "serve.yaml")) as running:
        yield running.base, tokens


placements = st.sampled_from((None, *CONTEXTS))
principals = st.sampled_from(PRINCIPALS)
actors = st.sampled_from(("owner", *PRINCIPALS))


class Interleavings(RuleBasedStateMachine):
    """One space, several principals, the family's ops in any order."""

    base: ClassVar[str] = ""
    tokens: ClassVar[dict[str, str]] = {}
    http: ClassVar[requests.Session]

    @initialize()
    def space(self) -> None:
        self.space_id = f"prop-{uuid.uuid4().hex[:10]}"
        self.model = Model()
        for subject in SUBJECTS:
            self.ok("owner", "memory.subjects.ensure", {"subject_id": subject})

    def send(self, who: str, name: str, request: dict[str, Any]) -> requests.Response:
        reply = self.http.post(f"{self.base}/v1/spoke/memory", json={
            "op": name, "request": {"space_id": self.space_id, **request}},
            headers={"Authorization": f"Bearer {self.tokens[who]}"}, timeout=30)
        assert reply.status_code < 500, reply.text
        return reply

    def ok(self, who: str, name: str, request: dict[str, Any]) -> dict[str, Any]:
        reply = self.send(who, name, request)
        assert reply.status_code == 200, (who, name, request, reply.text)
        answer: dict[str, Any] = reply.json()
        return answer

    def expect(self, allowed: bool, reply: requests.Response, what: str) -> bool:
        """The reply matches the model: success exactly when it allows the op."""
        assert (reply.status_code == 200) == allowed, (what, allowed, reply.text)
        return allowed

    @rule(issuer=actors, to=principals, caps=st.sets(st.sampled_from(CAPS), min_size=1),
          subjects=st.sampled_from((None, ("s1",), ("s2",))),
          contexts=st.sampled_from((None, ("c1",), ("c2",))), shared=st.booleans())
    def grant(self, issuer: str, to: str, caps: set[str], subjects: tuple[str, ...] | None,
              contexts: tuple[str, ...] | None, shared: bool) -> None:
        new = Grant("", issuer, to, frozenset(caps), None if subjects is None else
                    frozenset(subjects), None if contexts is None else frozenset(contexts),
                    shared)
        within = issuer == "owner" or any(
            g.to == issuer and g.live and "grants" in g.caps and g.contains(new)
            for g in self.model.grants)
        reply = self.send(issuer, "memory.grants.grant", {
            "principal_id": to, "capabilities": sorted(caps), "shared_access": shared,
            "subject_ids": None if subjects is None else list(subjects),
            "context_ids": None if contexts is None else list(contexts)})
        if self.expect(within and not self.model.frozen, reply, f"grant by {issuer}"):
            new.id = reply.json()["refs"][0]
            self.model.grants.append(new)

    @precondition(lambda self: any(g.live for g in self.model.grants))
    @rule(data=st.data(), who=actors)
    def revoke(self, data: st.DataObject, who: str) -> None:
        grant = data.draw(st.sampled_from([g for g in self.model.grants if g.live]))
        allowed = who in ("owner", grant.issuer) and not self.model.frozen
        reply = self.send(who, "memory.grants.revoke", {"grant_id": grant.id})
        if self.expect(allowed, reply, f"revoke by {who}"):
            grant.live = False

    @rule(who=actors, subject=st.sampled_from(SUBJECTS), placement=placements)
    def create(self, who: str, subject: str, placement: Placement) -> None:
        allowed = self.model.covers(who, "records_write", subject, placement) and \
            self.model.writable(subject, placement)
        reply = self.send(who, "memory.records.create", {
            "subject_id": subject, "content": {"text": f"note {subject}"},
            "placement": _placement(placement)})
        if self.expect(allowed, reply, f"create by {who}"):
            self.model.records.append(Record(reply.json()["refs"][0], subject, placement))

    def _visible(self, who: str, record: Record, cap: str = "records_read") -> bool:
        return self.model.covers(who, cap, record.subject, record.placement)

    @precondition(lambda self: self.model.records)
    @rule(data=st.data(), who=actors, delete=st.booleans())
    def change(self, data: st.DataObject, who: str, delete: bool) -> None:
        record = data.draw(st.sampled_from(self.model.records))
        allowed = self._visible(who, record) and self.model.covers(
            who, "records_write", record.subject, record.placement) and not record.deleted \
            and self.model.writable(record.subject, record.placement)
        ref = {"record_id": record.id, "expected_revision": record.revision}
        reply = self.send(who, "memory.records.delete", ref) if delete else self.send(
            who, "memory.records.update", {**ref, "content": {"text": "note changed"}})
        if self.expect(allowed, reply, f"{'delete' if delete else 'update'} by {who}"):
            record.revision += 1
            record.deleted = delete

    @precondition(lambda self: self.model.records)
    @rule(data=st.data(), who=actors)
    def get(self, data: st.DataObject, who: str) -> None:
        record = data.draw(st.sampled_from(self.model.records))
        reply = self.send(who, "memory.records.get", {"record_id": record.id})
        if not self.expect(self._visible(who, record), reply, f"get by {who}"):
            assert reply.json()["error"]["code"] == "record_not_found"

    @rule(who=actors)
    def read_many(self, who: str) -> None:
        listed = self.ok(who, "memory.records.list", {"limit": 500})
        readable = {r.id for r in self.model.records if not r.deleted and self._visible(who, r)}
        assert {r["record_id"] for r in listed["records"]} == readable
        assert listed["total_authorized"] == len(readable)
        recalled = self.ok(who, "memory.recall", {"query": "note", "limit": 100})
        assert {h["record"]["record_id"] for h in recalled["results"]} <= {
            r.id for r in self.model.records if not r.deleted
            and self._visible(who, r, "recall")}

    @rule(who=actors, subject=st.sampled_from(SUBJECTS), scope=placements)
    def capture(self, who: str, subject: str, scope: Placement) -> None:
        allowed = self.model.covers(who, "capture", subject, scope) and \
            self.model.writable(subject, scope)
        reply = self.send(who, "memory.capture", {
            "subject_id": subject, "capture_scope": _placement(scope),
            "items": [{"text": f"note captured {subject}"}]})
        if self.expect(allowed, reply, f"capture by {who}"):
            self.model.candidates.append(Candidate(reply.json()["refs"][0], subject, scope))

    @precondition(lambda self: any(c.pending for c in self.model.candidates))
    @rule(data=st.data(), who=actors, promote=st.booleans())
    def review(self, data: st.DataObject, who: str, promote: bool) -> None:
        candidate = data.draw(st.sampled_from([c for c in self.model.candidates
                                               if c.pending]))
        covered = [self.model.covers(who, cap, candidate.subject, candidate.scope)
                   for cap in ("review", "records_write")]
        allowed = all(covered) and self.model.writable(candidate.subject, candidate.scope)
        reply = self.send(who, "memory.candidates.review", {
            "candidate_id": candidate.id, "decision": "promote" if promote else "drop"})
        if self.expect(allowed, reply, f"review by {who}"):
            candidate.pending = False
            for made in reply.json()["refs"][1:]:
                self.model.records.append(Record(made, candidate.subject, candidate.scope))

    @rule(freeze=st.booleans())
    def freezing(self, freeze: bool) -> None:
        reply = self.send("owner", f"memory.spaces.{'freeze' if freeze else 'unfreeze'}", {})
        if self.expect(freeze != self.model.frozen, reply, "freeze"):
            self.model.frozen = freeze

    @rule(subject=st.sampled_from(SUBJECTS), context=st.sampled_from((None, *CONTEXTS)),
          fence=st.booleans())
    def fencing(self, subject: str, context: str | None, fence: bool) -> None:
        if context is None:
            action, extra = ("fence" if fence else "unfence"), {}
        else:
            action, extra = ("fence_context" if fence else "unfence_context"), {
                "context_id": context}
        reply = self.send("owner", "memory.subjects.fence", {
            "subject_id": subject, "action": action, **extra})
        if not self.expect(not self.model.frozen, reply, "fence"):
            return
        if context is None:
            (self.model.fenced.add if fence else self.model.fenced.discard)(subject)
        else:
            marks = self.model.fenced_contexts
            (marks.add if fence else marks.discard)((subject, context))


def _placement(placement: Placement) -> dict[str, Any]:
    return {"shared": True} if placement is None else {"context_id": placement}


def test_no_principal_reads_or_writes_outside_its_live_grants(
    served: tuple[str, dict[str, str]],
) -> None:
    Interleavings.base, Interleavings.tokens = served
    with requests.Session() as http:
        Interleavings.http = http
        machine = Interleavings.TestCase
        machine.settings = settings(max_examples=RUNS, stateful_step_count=STEPS,
                                    deadline=None, database=None,
                                    suppress_health_check=[HealthCheck.too_slow])
        machine().runTest()
