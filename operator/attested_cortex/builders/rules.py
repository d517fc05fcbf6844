"""PermissionRules compiled into the cortex rule set (``permissions.rules`` of the server's
config file, :class:`attested_cortex.server.settings.RuleSettings`) and their summary. Pure.

Order is the evaluation order: higher ``priority`` first, then the rule's name, so the
rendered file and the status summary are the same on every reconcile.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from attested_cortex.builders.inputs import Cortex, Rule

Object = dict[str, Any]

DECISIONS: Final = {"Allow": "allow", "Deny": "deny", "AskUser": "ask_user"}


def source(rule: Rule) -> str:
    """``<namespace>/<name>``: which object a decision came from."""
    return f"{rule.meta.namespace}/{rule.meta.name}"


def validate_rule(rule: Rule, cortex: Cortex | None) -> str | None:
    """Why the rule cannot be compiled for its cortex, or None when it can."""
    if rule.spec.decision == "AskUser" and cortex is not None and not cortex.spec.approval.enabled:
        return (f"decision AskUser needs the approval API, but MemoryCortex "
                f"{cortex.meta.name} has spec.approval.enabled: false")
    return None


def ordered(rules: Iterable[Rule]) -> list[Rule]:
    """Evaluation order: priority descending, then name."""
    return sorted(rules, key=lambda r: (-r.spec.priority, r.meta.name))


def compile_rule(rule: Rule) -> Object:
    """One entry of ``permissions.rules``."""
    spec = rule.spec
    return {"source": source(rule), "namespace": spec.namespace, "agents": sorted(spec.agents),
            "operations": sorted(spec.operations), "decision": DECISIONS[spec.decision],
            "inherit": spec.inherit, "priority": spec.priority, "reason": spec.reason}


def summary_line(rule: Rule) -> str:
    """One human line per rule, in evaluation order, for ``status.ruleSummary``."""
    spec = rule.spec
    scope = f"{spec.namespace}{' (and children)' if spec.inherit else ''}"
    return (f"[{spec.priority}] {spec.decision} {','.join(sorted(spec.operations))} on {scope}"
            f" for {','.join(sorted(spec.agents))} ({rule.meta.name})")
