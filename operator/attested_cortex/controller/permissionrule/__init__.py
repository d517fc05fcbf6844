"""PermissionRule: compiled for its cortex (Accepted or Invalid with the reason); the
MemoryCortex controller renders the accepted rules into the server's config and its
ordered ``ruleSummary``. Called by the work queue (:mod:`attested_cortex.controller.registry`).

Compiled is not in force: the server reads its rules once at start, so a rule is in force
(``InForce``, part of Ready) only when the cortex's ``ruleSummary`` lists it and its
``ServerReady`` is True for the cortex's current generation, which the MemoryCortex
controller reports only once every serving pod runs the template it rendered with that
summary (controller/memorycortex/server.py). A rule said ``RuleInForce`` while the rollout
that carried it had not happened (the HookChain flaw of issue 21, item 5, in another kind).
"""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.conditions import Observation, find, ready
from attested_cortex.builders.inputs import (
    InvalidSpecError,
    Rule,
    parse_cortex,
    parse_rule,
)
from attested_cortex.builders.rules import summary_line, validate_rule
from attested_cortex.controller.opening import open_satellite
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND = "PermissionRule"


def in_force(rule: Rule, cortex: dict[str, Any]) -> Observation:
    """InForce from the cortex's status: listed in ruleSummary, and ServerReady current."""
    status = cortex.get("status") or {}
    server = find(status.get("conditions"), "ServerReady") or {}
    current = server.get("observedGeneration") == cortex["metadata"].get("generation")
    if summary_line(rule) not in (status.get("ruleSummary") or []):
        return Observation.of("InForce", False, "NotRunning",
                              "not yet rendered into the cortex's rule set")
    if server.get("status") != "True" or not current:
        return Observation.of("InForce", False, "NotRunning",
                              "not yet loaded by every serving pod; the cortex says: "
                              f"{server.get('message') or 'nothing yet'}"[:1024])
    return Observation.of("InForce", True, "Loaded", "loaded by every serving server pod")


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a PermissionRule."""
    opened = await open_satellite(rt, key, parse_rule, kind=KIND, invalid_type="Accepted",
                                  invalid_reason="Invalid")
    if opened is None:
        return None
    rule, name = opened.resource, opened.cortex_name
    try:
        cortex = parse_cortex(opened.cortex) if opened.cortex is not None else None
    except InvalidSpecError:
        cortex = None
    problem = validate_rule(rule, cortex)
    accepted = Observation.of("Accepted", problem is None,
                              "Compiled" if problem is None else "Invalid",
                              problem or f"compiled into the rule set of MemoryCortex {name}")
    parts = [accepted, opened.located]
    if problem is None and opened.cortex is not None:
        parts.append(in_force(rule, opened.cortex))
    await write_status(rt.writer, kind=KIND, meta=rule.meta, current=opened.status,
                       observed=[*parts, ready(parts, ready_reason="RuleInForce",
                                               ready_message="rule in force")])
    return None
