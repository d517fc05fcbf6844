"""PermissionRule passes: compiled or refused with the reason, in force only once every
serving pod loaded it, one event per transition, nothing written when nothing changed."""

from __future__ import annotations

from attested_cortex.builders.inputs import parse_rule
from attested_cortex.builders.rules import summary_line
from tests.controller_fast.conftest import API, Operated, cortex, rule

KIND = "PermissionRule"


def _served(op: Operated, *rules: str, generation: int = 1) -> None:
    """The cortex's status as its controller writes it once the pods run ``rules``."""
    lines = [summary_line(parse_rule(op.get(KIND, name) or {})) for name in rules]
    op.set_status(API, "MemoryCortex", "mem", {"ruleSummary": lines, "conditions": [{
        "type": "ServerReady", "status": "True", "reason": "Rolled", "message": "1/1 ready",
        "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]})


async def test_a_rule_without_its_cortex_is_compiled_and_says_what_it_waits_for(
        op: Operated) -> None:
    op.apply(rule("team"))
    assert await op.reconcile(KIND, "team") is None
    assert op.reasons(KIND, "team") == {"Accepted": ("True", "Compiled"),
                                        "CortexFound": ("False", "CortexNotFound"),
                                        "Ready": ("False", "CortexNotFound"),
                                        "Reconciling": ("True", "CortexNotFound"),
                                        "Stalled": ("False", "CortexNotFound")}
    status = op.status(KIND, "team")
    assert status["observedGeneration"] == 1
    assert {c["observedGeneration"] for c in status["conditions"]} == {1}
    # a transition (a folder's apply makes rules before their cortex): Normal, issue 38
    assert op.events(KIND, "team") == [("Normal", "CortexNotFound")]


async def test_a_rule_is_in_force_only_once_the_serving_pods_loaded_it(op: Operated) -> None:
    op.apply(cortex("mem"), rule("team"))
    await op.reconcile(KIND, "team")
    assert op.condition(KIND, "team", "InForce")["message"] == (
        "not yet rendered into the cortex's rule set")
    assert op.reasons(KIND, "team")["Ready"] == ("False", "NotRunning")

    _served(op, "team", generation=0)  # rendered, but by a rollout of an older generation
    await op.reconcile(KIND, "team")
    assert op.condition(KIND, "team", "InForce")["message"].startswith(
        "not yet loaded by every serving pod; the cortex says: 1/1 ready")

    _served(op, "team")
    await op.reconcile(KIND, "team")
    assert op.reasons(KIND, "team")["InForce"] == ("True", "Loaded")
    assert op.reasons(KIND, "team")["Ready"] == ("True", "RuleInForce")
    assert op.events(KIND, "team")[-1] == ("Normal", "RuleInForce")


async def test_a_rule_its_cortex_cannot_serve_is_refused_with_the_reason(op: Operated) -> None:
    op.apply(cortex("mem", approval={"enabled": False}), rule("ask", decision="AskUser"))
    await op.reconcile(KIND, "ask")
    accepted = op.condition(KIND, "ask", "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "Invalid")
    assert "spec.approval.enabled: false" in accepted["message"]
    assert op.reasons(KIND, "ask")["Ready"] == ("False", "Invalid")
    assert "InForce" not in op.reasons(KIND, "ask")


async def test_a_spec_the_model_refuses_is_reported_once_and_nothing_else(op: Operated) -> None:
    op.apply(rule("odd", decision="Perhaps"))
    await op.reconcile(KIND, "odd")
    assert op.reasons(KIND, "odd") == {"Accepted": ("False", "Invalid"),
                                       "Ready": ("False", "Invalid"),
                                       "Reconciling": ("False", "Invalid"),
                                       "Stalled": ("True", "Invalid")}
    assert "spec.decision" in op.condition(KIND, "odd", "Accepted")["message"]
    writes = op.writes()
    await op.reconcile(KIND, "odd")
    assert op.writes() == writes and len(op.events(KIND, "odd")) == 1


async def test_an_idle_pass_writes_nothing(op: Operated) -> None:
    op.apply(cortex("mem"), rule("team"))
    await op.reconcile(KIND, "team")
    writes, events = op.writes(), op.events(KIND, "team")
    for _ in range(3):
        await op.reconcile(KIND, "team")
    assert op.writes() == writes and op.events(KIND, "team") == events


async def test_a_spec_change_is_observed_at_its_generation(op: Operated) -> None:
    op.apply(rule("team"))
    await op.reconcile(KIND, "team")
    op.apply(rule("team", priority=7))
    await op.reconcile(KIND, "team")
    status = op.status(KIND, "team")
    assert status["observedGeneration"] == 2
    assert {c["observedGeneration"] for c in status["conditions"]} == {2}
    assert "compiled into the rule set of MemoryCortex mem" in op.condition(
        KIND, "team", "Accepted")["message"]
    assert len(op.events(KIND, "team")) == 1  # no condition changed status or reason


async def test_a_deleted_rule_is_a_quiet_pass(op: Operated) -> None:
    assert await op.reconcile(KIND, "gone") is None
    assert op.writes() == 0
