"""The SQL reach of a read (:func:`...spoke.reading.reach` and the listing statement of
:mod:`attested_cortex.store.spoke.reading`) answers what the Python filter answered before
it: for random grants (revoked, expired, any capabilities, subjects, contexts and shared
access), any subject, selection and provenance filter, the listed records and their count
are those :func:`attested_cortex.spoke.coverage.covers` and the placement rules of
:class:`ReadSelection` keep, in creation order, tombstones left out. Real PostgreSQL; the
tombstones are made by updating the memory rows (the trigger of migration 0023 copies them).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from attested_cortex.service.resources.spoke.access import Access
from attested_cortex.service.resources.spoke.reading import reach
from attested_cortex.spoke.coverage import Want, covers
from attested_cortex.spoke.models import MemoryGrant, Placement, ProvenanceFilter, ReadSelection
from attested_cortex.store.spoke.reading import page_statement

SUBJECTS, CONTEXTS, SOURCES = ["u1", "u2", "u3"], ["c1", "c2", "c3"], ["s1", "s2"]
NOW = datetime.now(UTC)


@pytest.fixture
def space(migrated_pg15_dsn: str) -> tuple[str, list[dict[str, Any]]]:
    """Space kb: a record at every (subject, context or shared, source or none), every
    seventh a tombstone; the live ones in creation order."""
    with psycopg.connect(migrated_pg15_dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("INSERT INTO memory_spaces (space_id, created_by) VALUES ('kb', 'o')")
        made = []
        for subject in SUBJECTS:
            conn.execute("INSERT INTO memory_subjects (space_id, subject_id) VALUES ('kb', %s)",
                         (subject,))
            for context in [*CONTEXTS, None]:
                for source in [*SOURCES, None]:
                    memory_id = uuid.uuid4()
                    conn.execute("INSERT INTO memories (id, namespace, content, author)"
                                 " VALUES (%s, 'kb', 'x', 'o')", (memory_id,))
                    conn.execute(
                        "INSERT INTO memory_records (memory_id, space_id, subject_id,"
                        " context_id, source_context_id, captured_by, created_at, revision)"
                        " SELECT id, 'kb', %s, %s, %s, 'o', created_at, revision"
                        " FROM memories WHERE id = %s", (subject, context, source, memory_id))
                    made.append({"memory_id": memory_id, "subject_id": subject,
                                 "context_id": context, "source_context_id": source})
        dead = [r["memory_id"] for r in made[::7]]
        conn.execute("UPDATE memories SET deleted_at = clock_timestamp(), content = '',"
                     " revision = revision + 1 WHERE id = ANY(%s)", (dead,))
    return migrated_pg15_dsn, [r for r in made if r["memory_id"] not in dead]


def old_selected(row: dict[str, Any], selection: ReadSelection,
                 provenance: ProvenanceFilter | None) -> bool:
    """The Python filter the listing used before it moved into SQL."""
    context, mode = row["context_id"], selection.mode
    if mode == "shared" and context is not None:
        return False
    if mode == "contexts" and context not in selection.context_ids:
        return False
    if mode == "contexts_and_shared" and context is not None \
            and context not in selection.context_ids:
        return False
    return provenance is None or row["source_context_id"] in provenance.source_context_ids


def some(names: list[str]) -> st.SearchStrategy[list[str] | None]:
    return st.none() | st.lists(st.sampled_from([*names, "x9"]), max_size=3)


grants = st.builds(
    lambda caps, subjects, contexts, shared, revoked, expired: MemoryGrant(
        grant_id=uuid.uuid4(), space_id="kb", principal_id="p", issued_by="o",
        capabilities=caps, subject_ids=subjects, context_ids=contexts, shared_access=shared,
        revoked_at=NOW if revoked else None,
        expires_at=NOW - timedelta(seconds=1) if expired else None, created_at=NOW),
    st.lists(st.sampled_from(["records_read", "recall", "records_write"]), min_size=1,
             max_size=3, unique=True),
    some(SUBJECTS), some(CONTEXTS), st.booleans(), st.booleans(), st.booleans())
selections = st.builds(
    lambda mode, contexts: ReadSelection(mode=mode, context_ids=contexts),
    st.sampled_from(["contexts", "shared", "contexts_and_shared", "all_authorized"]),
    st.lists(st.sampled_from([*CONTEXTS, "x9"]), max_size=3))
provenances = st.none() | st.builds(
    lambda ids: ProvenanceFilter(source_context_ids=ids),
    st.lists(st.sampled_from([*SOURCES, "x9"]), min_size=1, max_size=2))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(held=st.lists(grants, max_size=3), authority=st.booleans(),
       subject=st.none() | st.sampled_from([*SUBJECTS, "x9"]), selection=selections,
       provenance=provenances)
def test_the_sql_reach_is_the_python_filter(
    space: tuple[str, list[dict[str, Any]]], held: list[MemoryGrant], authority: bool,
    subject: str | None, selection: ReadSelection, provenance: ProvenanceFilter | None,
) -> None:
    dsn, live = space
    standing = Access("p", authority, tuple(held), NOW)
    expected = [r["memory_id"] for r in live if covers(
        authority=authority, grants=held, now=NOW, want=Want(
            "records_read", r["subject_id"], Placement(shared=True) if r["context_id"] is None
            else Placement(context_id=r["context_id"])))
        and (subject is None or r["subject_id"] == subject)
        and old_selected(r, selection, provenance)]
    where = reach(standing, "records_read", space_id="kb", subject_id=subject,
                  selection=selection, provenance=provenance)
    if not where.boxes:
        assert expected == []
        return
    statement, params = page_statement(where, after=None, limit=len(live))
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        rows = conn.execute(statement, params).fetchall()
    assert [r["memory_id"] for r in rows if r["memory_id"] is not None] == expected
    assert rows[0]["total"] == len(expected)
