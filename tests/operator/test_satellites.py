"""HookChain and PermissionRule: rendered into their cortex, refused with a reason, and
waiting for a cortex that does not exist yet."""

from __future__ import annotations

import json

import pytest
import yaml
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube

DAEMON = {"name": "audit", "events": ["post_store"], "mode": "Daemon",
          "sidecar": {"image": "example.invalid/audit:1", "command": ["audit-hook"]}}
EXEC = {"name": "redact", "events": ["pre_store"], "mode": "Exec", "priority": -5,
        "command": ["python", "-m", "attested_cortex.hooks.reference.redact"]}


def _hooks(operated: Operated, cortex_name: str) -> list[str]:
    config = operated.get("configmap", f"{cortex_name}-config") or {"data": {}}
    document = yaml.safe_load(config["data"].get("hooks.yaml", "")) or {}
    return [h["name"] for h in document.get("hooks") or []]


def _containers(operated: Operated, cortex_name: str) -> list[str]:
    deploy = operated.get("deployment", f"{cortex_name}-server") or {}
    spec = ((deploy.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c["name"] for c in spec.get("containers") or []]


def test_hook_chain_renders_hooks_and_sidecars(operated: Operated,
                                               operator: OperatorProcess) -> None:
    operated.apply(cortex("hooked"), satellite("HookChain", "chain", "hooked",
                                               hooks=[EXEC, DAEMON]))
    operated.kubectl("wait", "--for=condition=Ready", "hc/chain", "mcx/hooked", "--timeout=120s")
    wait_until(lambda: _hooks(operated, "hooked") == ["redact", "audit"], what="hooks rendered",
               seconds=60, interval_s=0.2)
    assert wait_until(lambda: "hook-audit" in _containers(operated, "hooked"), what="sidecar",
                      seconds=60, interval_s=0.2)
    assert operated.get("HookChain", "chain")["status"]["hookCount"] == 2
    assert operated.get("MemoryCortex", "hooked")["status"]["hookCount"] == 2


def test_invalid_chain_keeps_the_last_good_configuration(operated: Operated,
                                                         operator: OperatorProcess) -> None:
    operated.apply(cortex("keep"), satellite("HookChain", "kept", "keep", hooks=[EXEC]))
    operated.kubectl("wait", "--for=condition=Ready", "hc/kept", "--timeout=90s")
    wait_until(lambda: _hooks(operated, "keep") == ["redact"], what="hook rendered", seconds=60,
               interval_s=0.2)
    hot = {"name": "spawner", "events": ["post_recall"], "mode": "Exec", "command": ["x"]}
    operated.kubectl("patch", "hc/kept", "--type=merge", "-p",
                     json.dumps({"spec": {"hooks": [EXEC, hot]}}))
    cond = operated.wait_condition("HookChain", "kept", "Ready", "False", reason="InvalidHook")
    assert "spawner" in cond["message"] and "post_recall" in cond["message"]
    generation = operated.get("HookChain", "kept")["metadata"]["generation"]
    assert cond["observedGeneration"] == generation
    assert _hooks(operated, "keep") == ["redact"]
    events = operated.kubectl("get", "events", "--field-selector",
                              "involvedObject.name=kept", "-o", "json").stdout
    assert "InvalidHook" in events


def test_hook_name_clash_between_chains_is_refused(operated: Operated,
                                                   operator: OperatorProcess) -> None:
    operated.apply(cortex("clash"), satellite("HookChain", "a-first", "clash", hooks=[EXEC]),
                   satellite("HookChain", "b-second", "clash", hooks=[EXEC]))
    cond = operated.wait_condition("HookChain", "b-second", "Ready", "False",
                                   reason="InvalidHook")
    assert "a-first" in cond["message"] and "redact" in cond["message"]
    operated.wait_condition("HookChain", "a-first", "Ready")


def test_rules_compile_in_order_into_status_and_config(operated: Operated,
                                                       operator: OperatorProcess) -> None:
    operated.apply(
        cortex("ruled"),
        satellite("PermissionRule", "deny-secrets", "ruled", namespace="secrets/**",
                  agents=["*"], operations=["recall", "store"], decision="Deny", priority=10,
                  reason="no agent reads secrets"),
        satellite("PermissionRule", "allow-team", "ruled", namespace="team/*", agents=["*"],
                  operations=["*"], decision="Allow"))
    for name in ("deny-secrets", "allow-team"):
        operated.kubectl("wait", "--for=condition=Ready", f"prule/{name}", "--timeout=90s")

    def summary() -> list[str] | None:
        status = operated.get("MemoryCortex", "ruled").get("status") or {}
        return status.get("ruleSummary") if len(status.get("ruleSummary") or []) == 2 else None

    lines = wait_until(summary, what="rule summary", seconds=60, interval_s=0.2)
    assert "deny-secrets" in lines[0] and "allow-team" in lines[1]
    config = yaml.safe_load(operated.get("configmap", "ruled-config")["data"]["config.yaml"])
    rules = config["permissions"]["rules"]
    assert [r["source"] for r in rules] == [f"{operated.namespace}/deny-secrets",
                                            f"{operated.namespace}/allow-team"]
    assert rules[0]["decision"] == "deny" and rules[0]["reason"] == "no agent reads secrets"
    operated.kubectl("patch", "prule/allow-team", "--type=merge", "-p",
                     json.dumps({"spec": {"priority": 50}}))  # an update reorders the rules

    def reordered() -> list[str] | None:
        lines = summary() or []
        return lines if lines and "allow-team" in lines[0] else None

    assert "deny-secrets" in wait_until(reordered, what="the new order", seconds=60,
                                        interval_s=0.2)[1]


def test_ask_user_rule_is_invalid_without_approvals(operated: Operated,
                                                    operator: OperatorProcess) -> None:
    operated.apply(cortex("noapprove", approval={"enabled": False}),
                   satellite("PermissionRule", "ask", "noapprove", namespace="x", agents=["*"],
                             operations=["delete"], decision="AskUser"))
    cond = operated.wait_condition("PermissionRule", "ask", "Accepted", "False", reason="Invalid")
    assert "approval" in cond["message"]
    operated.kubectl("patch", "mcx/noapprove", "--type=merge", "-p",
                     json.dumps({"spec": {"approval": {"enabled": True}}}))
    operated.wait_condition("PermissionRule", "ask", "Ready")


def test_satellites_wait_for_a_cortex_that_does_not_exist_yet(operated: Operated,
                                                              operator: OperatorProcess) -> None:
    operated.apply(satellite("PermissionRule", "early", "later", namespace="a", agents=["*"],
                             operations=["*"], decision="Allow"),
                   satellite("AgentIdentity", "early-agent", "later"))
    cond = operated.wait_condition("PermissionRule", "early", "Ready", "False",
                                   reason="CortexNotFound")
    assert "later" in cond["message"]
    operated.wait_condition("AgentIdentity", "early-agent", "Ready", "False",
                            reason="CortexNotFound")
    operated.apply(cortex("later"))
    operated.wait_condition("PermissionRule", "early", "Ready")
    operated.wait_condition("AgentIdentity", "early-agent", "Ready")


def test_the_examples_reconcile_to_ready(operated: Operated, operator: OperatorProcess) -> None:
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "examples" / "cortex"
    operated.kubectl("apply", "-f", str(folder))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/team-memory", "aid/planner",
                     "aid/researcher", "hc/safety", "prule/no-secrets", "prule/team-shares",
                     "prule/deletes-need-a-human", "--timeout=180s")
    status = operated.get("MemoryCortex", "team-memory")["status"]
    assert status["hookCount"] == 2 and status["identities"] == 2
    assert [line.rsplit("(", 1)[1] for line in status["ruleSummary"]] == [
        "no-secrets)", "deletes-need-a-human)", "team-shares)"]
    assert "hook-auto-link" in _containers(operated, "team-memory")
    # Issue 38: a steady install emits no Warning (transitions are Normal) ...
    examples = {"team-memory", "planner", "researcher", "safety", "no-secrets", "team-shares",
                "deletes-need-a-human"}
    assert _warnings(operated, examples) == []
    # ... and neither does a spec change of the cortex while its satellites settle.
    generation = operated.get("MemoryCortex", "team-memory")["metadata"]["generation"]
    operated.kubectl("patch", "mcx/team-memory", "--type=merge", "-p",
                     json.dumps({"spec": {"quotas": {"requestsPerSecond": 77}}}))
    wait_until(lambda: operated.get("MemoryCortex", "team-memory")["status"].get(
        "observedGeneration") == generation + 1, what="the change observed", seconds=60,
        interval_s=0.2)
    operated.kubectl("wait", "--for=condition=Ready", "mcx/team-memory", "hc/safety",
                     "prule/no-secrets", "--timeout=180s")
    assert _warnings(operated, examples) == []


def _warnings(operated: Operated, names: set[str]) -> list[str]:
    """The Warning events about the named objects: reason and message."""
    events = json.loads(operated.kubectl("get", "events", "--field-selector", "type=Warning",
                                         "-o", "json").stdout)["items"]
    return [f"{e['involvedObject']['name']} {e['reason']}: {e['message']}" for e in events
            if e["involvedObject"]["name"] in names]
