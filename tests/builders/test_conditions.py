"""Status conditions: merge, transitions and the Ready summary."""

from attested_cortex.builders.conditions import (
    Observation,
    find,
    kstatus,
    merge,
    ready,
    transitions,
)

T0 = "2026-11-30T10:00:00Z"
T1 = "2026-11-30T11:00:00Z"


def test_first_merge_sets_every_field() -> None:
    merged = merge(None, [Observation.of("DatabaseReady", True, "Running", "db up")],
                   generation=4, now=T0)
    assert merged == [{"type": "DatabaseReady", "status": "True", "observedGeneration": 4,
                       "lastTransitionTime": T0, "reason": "Running", "message": "db up"}]


def test_same_status_keeps_the_transition_time_and_updates_the_rest() -> None:
    old = merge(None, [Observation.of("Ready", False, "Pending", "waiting")], generation=1, now=T0)
    new = merge(old, [Observation.of("Ready", False, "StillPending", "still")], generation=2,
                now=T1)
    cond = find(new, "Ready")
    assert cond is not None
    assert cond["lastTransitionTime"] == T0
    assert cond["observedGeneration"] == 2
    assert (cond["reason"], cond["message"]) == ("StillPending", "still")


def test_status_change_moves_the_transition_time() -> None:
    old = merge(None, [Observation.of("Ready", False, "Pending", "")], generation=1, now=T0)
    new = merge(old, [Observation.of("Ready", True, "Ready", "ok")], generation=1, now=T1)
    assert find(new, "Ready")["lastTransitionTime"] == T1  # type: ignore[index]


def test_merging_the_same_observation_twice_changes_nothing() -> None:
    obs = [Observation.of("Ready", True, "Ready", "ok"), Observation.of("A", True, "Ok", "")]
    once = merge(None, obs, generation=3, now=T0)
    assert merge(once, obs, generation=3, now=T1) == once
    assert transitions(once, merge(once, obs, generation=3, now=T1)) == []


def test_unobserved_conditions_are_kept_and_output_is_sorted() -> None:
    old = merge(None, [Observation.of("Zeta", True, "Ok", "")], generation=1, now=T0)
    new = merge(old, [Observation.of("Alpha", False, "Bad", "x")], generation=2, now=T1)
    assert [c["type"] for c in new] == ["Alpha", "Zeta"]
    assert find(new, "Zeta") == old[0]


def test_long_messages_are_capped() -> None:
    merged = merge(None, [Observation("Ready", "False", "Big", "x" * 40000)], generation=1,
                   now=T0)
    assert len(merged[0]["message"]) == 32768


def test_transitions_lists_only_changes() -> None:
    old = merge(None, [Observation.of("A", True, "Ok", "m"), Observation.of("B", True, "Ok", "m"),
                       Observation.of("C", False, "Bad", "m")], generation=1, now=T0)
    new = merge(old, [Observation.of("A", True, "Ok", "other message"),
                      Observation.of("B", False, "Broke", "m"),
                      Observation.of("C", False, "WorseBad", "m"),
                      Observation.of("D", True, "New", "m")], generation=2, now=T1)
    assert [c["type"] for c in transitions(old, new)] == ["B", "C", "D"]
    assert transitions(None, old) == old


def test_ready_when_every_part_is_true() -> None:
    parts = [Observation.of("DatabaseReady", True, "Running", ""),
             Observation.of("ServerReady", True, "Available", "")]
    assert ready(parts) == Observation("Ready", "True", "Ready", "all conditions are true")
    assert ready(parts, ready_reason="HooksInForce", ready_message="m") == Observation(
        "Ready", "True", "HooksInForce", "m")


def test_ready_follows_the_first_part_not_true() -> None:
    parts = [Observation.of("DatabaseReady", True, "Running", ""),
             Observation("SchemaReady", "Unknown", "Migrating", "to v7"),
             Observation.of("ServerReady", False, "Crash", "boom")]
    assert ready(parts) == Observation("Ready", "Unknown", "Migrating", "SchemaReady: to v7")
    assert ready(parts[::2]) == Observation("Ready", "False", "Crash", "ServerReady: boom")


def test_find() -> None:
    conds = merge(None, [Observation.of("Ready", True, "Ready", "")], generation=1, now=T0)
    assert find(conds, "Ready") is conds[0]
    assert find(conds, "Other") is None and find(None, "Ready") is None


def test_kstatus_pair_follows_ready() -> None:
    """Reconciling/Stalled restate Ready for kstatus (ADR 0046): on its way, failed, done."""
    moving = frozenset({"Migrating"})
    pairs = {
        (o.type, o.status)
        for o in kstatus(Observation("Ready", "False", "Migrating", "m"), moving)}
    assert pairs == {("Reconciling", "True"), ("Stalled", "False")}
    failed = kstatus(Observation("Ready", "False", "MigrationFailed", "job failed"), moving)
    assert {(o.type, o.status) for o in failed} == {("Reconciling", "False"), ("Stalled", "True")}
    assert next(o for o in failed if o.type == "Stalled").message == "job failed"
    done = kstatus(Observation("Ready", "True", "Ready", "ok"), moving)
    assert {o.status for o in done} == {"False"}
    unknown = kstatus(Observation("Ready", "Unknown", "Odd", "?"), moving)
    assert ("Reconciling", "True") in {(o.type, o.status) for o in unknown}
