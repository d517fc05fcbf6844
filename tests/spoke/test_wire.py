"""The family's wire contract, pure: thirteen models, 33 ops under three flags, the published
schemas in step with the models, content's absent-versus-empty members, non-amplification."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from attested_cortex.service.pipeline.operations import OPERATIONS, SPOKE_MEMORY
from attested_cortex.spoke import schemas
from attested_cortex.spoke.coverage import Want, covers, may_issue
from attested_cortex.spoke.models import MODELS, Content, MemoryGrant, MemoryReceipt, Placement
from attested_cortex.spoke.operations import MEMORY_OPS

PUBLISHED = Path(__file__).parents[2] / "docs" / "spoke-memory" / "schemas"
NOW = datetime(2026, 12, 2, tzinfo=UTC)


def test_thirteen_models_and_33_ops_under_their_flags() -> None:
    assert len(MODELS) == 13
    assert Counter(op.flag for op in MEMORY_OPS.values()) == {
        "spoke-memory": 25, "spoke-memory-reflection": 3, "spoke-memory-transfer": 5}
    pending = {name for name, op in MEMORY_OPS.items() if op.may_pend}
    assert pending == {"memory.reflections.generate", "memory.exports.create",
                       "memory.imports.stage", "memory.imports.activate"}
    assert all(op.answer is MemoryReceipt for op in MEMORY_OPS.values() if op.mutating)
    # every op declared once in the pipeline's table, as a write or a read
    for name, op in MEMORY_OPS.items():
        spec = SPOKE_MEMORY[name]
        assert OPERATIONS[spec.name] is spec
        assert spec.restricted == op.mutating
        forgets = name in ("memory.records.delete", "memory.candidates.dismiss")  # ADR 0083
        assert spec.scope == ("memory.forget" if forgets else
                              "memory.write" if op.mutating else "memory.read")


def test_durable_models_carry_schema_version_and_extensions() -> None:
    durable = {"MemorySpace", "Subject", "MemoryGrant", "RetainedRecord", "MemoryCandidate",
               "ProfileDocument", "Reflection", "MemoryReceipt", "MemoryExportBundle"}
    for name in durable:
        assert {"schema_version", "extensions"} <= set(MODELS[name].model_fields), name


def test_published_schemas_match_the_models() -> None:
    documents = schemas.documents()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in PUBLISHED.glob("*.json")}
    assert on_disk == documents, \
        "run: python -m attested_cortex.spoke.schemas docs/spoke-memory/schemas"


def test_absent_and_empty_cognition_stay_distinct() -> None:
    assert Content(text="a").wire() == {"text": "a"}
    assert Content(text="a", cognition=[]).wire() == {"text": "a", "cognition": []}
    record = {"view": "recorded_at", "kind": "belief", "attribution": "x", "basis": "said",
              "recorded_at": "2026-12-01T00:00:00Z"}
    assert Content.model_validate({"text": "a", "cognition": [record]}).cognition
    for bad in ({**record, "view": "current"}, {**record, "extra": 1}, {"view": "recorded_at"}):
        with pytest.raises(ValidationError):
            Content.model_validate({"text": "a", "cognition": [bad]})


def test_a_placement_is_shared_or_one_context() -> None:
    assert Placement(shared=True).shared and Placement(context_id="c").context_id == "c"
    for bad in ({}, {"shared": True, "context_id": "c"}):
        with pytest.raises(ValidationError):
            Placement.model_validate(bad)


def grant(**more: Any) -> MemoryGrant:
    fields: dict[str, Any] = {
        "grant_id": uuid.uuid4(), "space_id": "s", "principal_id": "p", "issued_by": "o",
        "capabilities": ["records_read", "grants"], "subject_ids": ["s1", "s2"],
        "context_ids": ["c1"], "shared_access": False, "created_at": NOW, **more}
    return MemoryGrant(**fields)


@pytest.mark.parametrize(("wider", "allowed"), [
    ({}, True),
    ({"capabilities": ["records_read", "records_write"]}, False),
    ({"subject_ids": None}, False),
    ({"subject_ids": ["s3"]}, False),
    ({"context_ids": None}, False),
    ({"shared_access": True}, False),
    ({"subject_ids": ["s1"], "capabilities": ["records_read"]}, True),
])
def test_a_grant_is_issued_only_within_one_of_the_issuers_grants(
    wider: dict[str, Any], allowed: bool,
) -> None:
    held = grant()
    assert may_issue(authority=False, issuer_grants=[held], new=grant(**wider),
                     now=NOW) is allowed
    assert may_issue(authority=True, issuer_grants=[], new=grant(**wider), now=NOW)


def test_expiry_bounds_issuing_and_covering() -> None:
    soon = NOW + timedelta(hours=1)
    held = grant(expires_at=soon)
    assert not may_issue(authority=False, issuer_grants=[held], new=grant(), now=NOW)
    assert may_issue(authority=False, issuer_grants=[held], new=grant(expires_at=soon),
                     now=NOW)
    want = Want("records_read", "s1", Placement(context_id="c1"))
    assert covers(authority=False, grants=[held], want=want, now=NOW)
    assert not covers(authority=False, grants=[held], want=want, now=soon)
    assert not covers(authority=False, grants=[grant(revoked_at=NOW)], want=want, now=NOW)
    assert not covers(authority=False, grants=[held],
                      want=Want("records_read", "s1", Placement(shared=True)), now=NOW)


_CAPS = ["records_read", "records_write", "grants", "admin"]
_SUBJECTS = ["s1", "s2", "s3"]
_CONTEXTS = ["c1", "c2", "c3"]


@st.composite
def grants_(draw: st.DrawFn) -> MemoryGrant:
    maybe = st.one_of(st.none(), st.lists(st.sampled_from(_SUBJECTS), unique=True))
    return grant(
        capabilities=draw(st.lists(st.sampled_from(_CAPS), min_size=1, unique=True)),
        subject_ids=draw(maybe),
        context_ids=draw(st.one_of(st.none(), st.lists(st.sampled_from(_CONTEXTS),
                                                        unique=True))),
        shared_access=draw(st.booleans()),
        expires_at=draw(st.one_of(st.none(), st.sampled_from(
            [NOW + timedelta(hours=h) for h in (1, 2)]))),
        revoked_at=draw(st.one_of(st.none(), st.just(NOW))))


WANTS = [Want(c, s, p) for c in _CAPS for s in _SUBJECTS  # type: ignore[arg-type]
         for p in [Placement(shared=True), *(Placement(context_id=c) for c in _CONTEXTS)]]


@settings(max_examples=150, deadline=None)
@given(held=st.lists(grants_(), max_size=3), new=grants_(),
       at=st.sampled_from([NOW, NOW + timedelta(minutes=90)]))
def test_an_issued_grant_never_covers_more_than_its_issuer(
    held: list[MemoryGrant], new: MemoryGrant, at: datetime,
) -> None:
    if not may_issue(authority=False, issuer_grants=held, new=new, now=NOW):
        return
    for want in WANTS:  # now and later (expiry): never wider than the issuer
        if covers(authority=False, grants=[new], want=want, now=at):
            assert covers(authority=False, grants=held, want=want, now=at), want
