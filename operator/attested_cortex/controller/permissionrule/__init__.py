"""PermissionRule: compiled for its cortex (Accepted or Invalid with the reason); the
MemoryCortex controller renders the accepted rules into the server's config and its
ordered ``ruleSummary``. Called by the work queue (:mod:`attested_cortex.controller.registry`).
"""

from __future__ import annotations

from attested_cortex.builders.conditions import Observation, cortex_found, ready
from attested_cortex.builders.inputs import (
    InvalidSpecError,
    parse_cortex,
    parse_rule,
)
from attested_cortex.builders.rules import validate_rule
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import report_unparsable, write_status

KIND = "PermissionRule"


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a PermissionRule."""
    body = rt.views.get(KIND, key.namespace, key.name)
    if body is None:
        return None
    status = body.get("status") or {}
    try:
        rule = parse_rule(body)
    except InvalidSpecError as exc:
        await report_unparsable(rt.writer, kind=KIND, body=body, type_="Accepted",
                                reason="Invalid", message=str(exc))
        return None
    name = rule.spec.cortex_ref.name
    cortex_body = rt.views.get("MemoryCortex", key.namespace, name)
    try:
        cortex = parse_cortex(cortex_body) if cortex_body is not None else None
    except InvalidSpecError:
        cortex = None
    problem = validate_rule(rule, cortex)
    accepted = Observation.of("Accepted", problem is None,
                              "Compiled" if problem is None else "Invalid",
                              problem or f"compiled into the rule set of MemoryCortex {name}")
    located = cortex_found(name, cortex_body is not None)
    parts = [accepted, located]
    await write_status(rt.writer, kind=KIND, meta=rule.meta, current=status,
                       observed=[*parts, ready(parts, ready_reason="RuleInForce",
                                               ready_message="rule in force")])
    return None
