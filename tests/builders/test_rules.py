"""PermissionRules: evaluation order, compilation, validation against the cortex, summary."""

from attested_cortex.builders.rules import compile_rule, ordered, summary_line, validate_rule
from attested_cortex.server.settings import RuleSettings
from tests.builders.specs import NAMESPACE, cortex, rule


def test_order_is_priority_descending_then_name() -> None:
    rules = [rule("m", {"priority": 0}), rule("b", {"priority": 0}), rule("z", {"priority": 100}),
             rule("a", {"priority": -1}), rule("c", {"priority": 100})]
    assert [r.meta.name for r in ordered(rules)] == ["c", "z", "b", "m", "a"]


def test_order_does_not_depend_on_listing_order() -> None:
    rules = [rule(n, {"priority": p}) for n, p in [("x", 1), ("y", 1), ("w", 5), ("v", -5)]]
    assert ordered(rules) == ordered(list(reversed(rules)))


def test_compiled_rule_is_a_server_rule() -> None:
    compiled = compile_rule(rule("ask", {
        "decision": "AskUser", "namespace": "team/*/notes", "agents": ["k8s:b/x", "k8s:a/y"],
        "operations": ["store", "delete"], "inherit": False, "priority": 12,
        "reason": "deletes need a human"}))
    assert compiled == {"source": f"{NAMESPACE}/ask", "namespace": "team/*/notes",
                        "agents": ["k8s:a/y", "k8s:b/x"], "operations": ["delete", "store"],
                        "decision": "ask_user", "inherit": False, "priority": 12,
                        "reason": "deletes need a human"}
    RuleSettings.model_validate(compiled)


def test_every_decision_compiles() -> None:
    for decision, wire in [("Allow", "allow"), ("Deny", "deny"), ("AskUser", "ask_user")]:
        assert compile_rule(rule("r", {"decision": decision}))["decision"] == wire


def test_ask_user_needs_the_approval_api() -> None:
    ask = rule("ask", {"decision": "AskUser"})
    off = cortex({"approval": {"enabled": False}})
    problem = validate_rule(ask, off)
    assert problem is not None
    assert "AskUser" in problem and "notes" in problem and "approval.enabled" in problem
    assert validate_rule(ask, cortex()) is None


def test_allow_and_deny_need_nothing() -> None:
    off = cortex({"approval": {"enabled": False}})
    assert validate_rule(rule("a"), off) is None
    assert validate_rule(rule("d", {"decision": "Deny"}), off) is None


def test_rule_without_a_cortex_is_not_refused_here() -> None:
    assert validate_rule(rule("ask", {"decision": "AskUser"}), None) is None


def test_summary_lines() -> None:
    assert summary_line(rule("team-read", {
        "priority": 5, "operations": ["search", "recall"], "agents": ["*"]})) == (
        "[5] Allow recall,search on team/** (and children) for * (team-read)")
    assert summary_line(rule("no-secrets", {
        "decision": "Deny", "namespace": "team/secrets", "inherit": False, "priority": -3,
        "agents": ["k8s:team-a/b", "k8s:team-a/a"]})) == (
        "[-3] Deny * on team/secrets for k8s:team-a/a,k8s:team-a/b (no-secrets)")


def test_summary_in_evaluation_order() -> None:
    rules = [rule("low", {"priority": -1}), rule("high", {"priority": 9, "decision": "Deny"})]
    lines = [summary_line(r) for r in ordered(rules)]
    assert lines[0].startswith("[9] Deny") and lines[1].startswith("[-1] Allow")
