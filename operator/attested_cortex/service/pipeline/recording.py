"""The audit step of the pipeline: what was decided, logged, counted and handed to the chain.

:func:`audit` runs after every operation (success or refusal). Every non-Allow decision is
logged with the agent, operation and source and counted in ``cortex_policy_decisions_total``;
advisory would-be denials are logged as warnings. Entries for the signed audit chain go through
``Services.audit_sink`` (an :data:`~.context.AuditSink`): the one place the chain writer plugs
in. :func:`chain_sink` is that writer when the server has a signing identity for policy
statements (``audit_signer``: an AgentIdentity with Cortex custody mounted in the key
directory): each record becomes a ``policy.<effect>`` event signed by that identity, naming the
acting agent, so ``audit verify`` covers it.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from attested_cortex.attest.auditing import append_event
from attested_cortex.attest.loading import KeySource
from attested_cortex.errors import DeniedError
from attested_cortex.policy.decisions import Decision
from attested_cortex.service.pipeline import accessing
from attested_cortex.service.pipeline.attesting import snapshot
from attested_cortex.service.pipeline.context import AuditSink, Caller, Services
from attested_cortex.service.pipeline.operations import OPERATIONS, OperationSpec
from attested_cortex.store.database import Database
from attested_cortex.types import AgentId

if TYPE_CHECKING:
    from attested_cortex.service.pipeline.running import Outcome

log = logging.getLogger("attested_cortex.policy")

_COUNTERS: dict[int, Counter] = {}


def counter(registry: CollectorRegistry | None) -> Counter | None:
    """``cortex_policy_decisions_total`` on ``registry`` (one per registry)."""
    if registry is None:
        return None
    found = _COUNTERS.get(id(registry))
    if found is None:
        found = _COUNTERS[id(registry)] = Counter(
            "cortex_policy_decisions_total", "Non-allow policy decisions",
            ["operation", "verdict", "source", "effect"], registry=registry)
    return found


async def audit(svc: Services, caller: Caller, spec: OperationSpec, outcome: Outcome,
                call: Any = None) -> None:
    """Record the operation's non-Allow decisions and a trust-ceiling or scope refusal; each
    record names the caller's tier and effective scopes. A successful read is recorded as
    a ``memory.access`` statement (:mod:`.accessing`) when the server records reads."""
    decisions = list(outcome.decisions)
    error = outcome.error
    if isinstance(error, DeniedError) and error.code in ("trust_ceiling", "scope_denied"):
        decisions.append(Decision("deny", error.code, error.message, error.code))
    if (error is None and svc.access_sink is not None and outcome.target is not None
            and accessing.is_read(spec)):
        record = accessing.access_record(spec, outcome, call, outcome.result,
                                         outcome.target.namespaces)
        await svc.access_sink(caller, spec, record)
    if not decisions:
        return
    metric = counter(svc.metrics_registry)
    sink = svc.audit_sink
    for decision in decisions:
        effect = "advisory" if decision in outcome.advisory else (
            "post" if decision is outcome.post_denied and outcome.error is None else "enforced")
        source = decision.source.split(":", 1)[0]
        if metric is not None:
            metric.labels(spec.name, decision.verdict, source, effect).inc()
        record = {"operation": spec.name, "agent_id": caller.agent_id,
                  "verdict": decision.verdict, "source": decision.source,
                  "reason": decision.reason, "effect": effect,
                  "mode": svc.permission_mode, "trust_tier": caller.tier,
                  "effective_scopes": str(caller.scopes)}
        level = logging.WARNING if effect == "advisory" else logging.INFO
        log.log(level, "policy decision", extra=record)
        if sink is not None:
            await sink(caller, spec, record)


async def refused_at_entry(svc: Services, caller: Caller, where: str,
                           error: DeniedError) -> None:
    """Record a refusal made when the request was authenticated, before any operation ran
    (a Kernel tier presented, a tier above the credential's, ``X-Cortex-Scopes`` wider than
    held): no pipeline runs for it, so its audit step is this one. ``where``: the route (or
    ``/mcp``) it was sent to. Called by the HTTP middleware."""
    metric = counter(svc.metrics_registry)
    if metric is not None:
        metric.labels(where, "deny", error.code, "enforced").inc()
    record = {"operation": where, "agent_id": caller.agent_id, "verdict": "deny",
              "source": error.code, "reason": error.message, "effect": "enforced",
              "mode": svc.permission_mode, "trust_tier": caller.tier,
              "effective_scopes": str(caller.scopes)}
    log.info("policy decision", extra=record)
    if svc.audit_sink is not None:
        await svc.audit_sink(caller, None, record)


def approval_recorder(
    *, permission_mode: str, registry: CollectorRegistry | None, sink: AuditSink | None,
) -> Callable[[str, Any], Awaitable[None]]:
    """Records approval events (decided, expired: an expired action is denied) like the
    pipeline's audit step: log, counter, the chain's ``sink``. Built before the services
    it becomes part of, from the same values."""

    async def record(kind: str, action: Any) -> None:
        verdict = "allow" if action.status == "approved" else "deny"
        entry = {"operation": action.operation, "agent_id": action.agent_id,
                 "verdict": verdict, "source": f"approval:{kind}", "reason": action.reason,
                 "effect": action.status, "approval_id": str(action.id),
                 "decided_by": action.decided_by, "mode": permission_mode}
        log.info("approval %s", kind, extra=entry)
        metric = counter(registry)
        if metric is not None and verdict == "deny":
            metric.labels(action.operation, "deny", "approval", action.status).inc()
        if sink is not None:
            caller = Caller(AgentId(action.agent_id), "approval")
            await sink(caller, OPERATIONS[action.operation], entry)

    return record


def chain_sink(db: Database, keys: KeySource, signer_id: str) -> AuditSink:
    """Append each record to the signed audit chain, signed by ``signer_id``'s key (looked up
    in the current key snapshot at each record: keys rotate)."""

    async def sink(caller: Caller, spec: OperationSpec | None,
                   record: dict[str, Any]) -> None:
        signer = snapshot(keys).signing_keys.get(AgentId(signer_id))
        if signer is None:  # the key was unmounted: say so loudly, never drop silently
            log.error("audit_signer %s has no mounted private key; policy record not chained",
                      signer_id, extra=record)
            return
        kind, body = statement(caller, record)
        async with db.transaction() as conn:
            await append_event(conn, agent_id=signer_id, event_type=kind,
                               payload=body, signer=signer)

    return sink


def statement(caller: Caller, record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The event type and signed statement of a record: its fields (none empty), the acting
    agent, the time and a nonce (two equal records are two statements, never a replay)."""
    body = {**{k: v for k, v in record.items() if v is not None and k != "event_type"},
            "actor": caller.agent_id, "at_ns": time.time_ns(), "nonce": secrets.token_hex(8)}
    kind = record.get("event_type") or (
        "policy." + str(record.get("effect", "decision")).replace("-", "_"))
    return str(kind)[:64], body
