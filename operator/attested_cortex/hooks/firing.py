"""Runs one chain: each hook in priority order, inside the event class deadline.

Called by :class:`attested_cortex.hooks.dispatching.HookPipeline.fire`. Each hook gets
``min(time left in the class deadline, its own timeout_ms)``; a hook reached after the
class deadline has passed is not called and counts as a ``timeout`` failure. Decisions
are folded by :mod:`.chaining`; every hook is counted in :mod:`.metrics`. A ``post_recall``
Modify (a reorder) is screened by :mod:`.reordering` first: a breach of its safety rule is a
``refused`` failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attested_cortex.hooks.chaining import ChainResult, ChainState, HookRecord, finish, fold
from attested_cortex.hooks.decisions import (
    Decision,
    MalformedDecisionError,
    Modify,
    parse_decision,
)
from attested_cortex.hooks.events import deadline_ms
from attested_cortex.hooks.metrics import HookMetrics
from attested_cortex.hooks.reordering import UnsafeReorderError, reorders, screen
from attested_cortex.hooks.settings import HookSpec
from attested_cortex.hooks.wire import HookFailure, RawHookRequest, Transport

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BoundHook:
    """A configured hook with its live transport."""

    spec: HookSpec
    transport: Transport


@dataclass(frozen=True)
class Fire:
    """One firing of an event."""

    event: str
    payload: Mapping[str, Any]
    agent_id: str
    namespace: str | None


async def run_chain(fire: Fire, hooks: Sequence[BoundHook], *, metrics: HookMetrics) -> ChainResult:
    """Run ``hooks`` (already filtered and ordered) over ``fire``."""
    deadline = time.monotonic() + deadline_ms(fire.event) / 1000
    state = ChainState(event=fire.event, payload=fire.payload)
    records: list[HookRecord] = []
    for hook in hooks:
        left_s = deadline - time.monotonic()
        outcome, latency_ms = await _call_one(fire, hook, state.payload, left_s=left_s)
        state, effect = fold(
            state, hook=hook.spec.name, outcome=outcome, fail_mode=hook.spec.fail_mode
        )
        records.append(_record(hook.spec.name, outcome, effect, latency_ms))
        _count(metrics, fire.event, records[-1])
        if state.stopped:
            break
    for warning in state.warnings:
        logger.warning("%s: %s", fire.event, warning)
    return finish(state, tuple(records))


async def _call_one(
    fire: Fire, hook: BoundHook, payload: Mapping[str, Any], *, left_s: float
) -> tuple[Decision | HookFailure, float]:
    budget_s = min(left_s, hook.spec.timeout_ms / 1000)
    started = time.perf_counter()
    if budget_s <= 0:
        return HookFailure("timeout", "the class deadline passed before this hook"), 0.0
    request: RawHookRequest = {
        "hook": hook.spec.name, "event": fire.event, "agent_id": fire.agent_id,
        "namespace": fire.namespace, "payload": dict(payload),
        "deadline_ms": max(1, int(budget_s * 1000)),
    }
    try:
        outcome: Decision | HookFailure = parse_decision(
            await hook.transport.call(request, timeout_s=budget_s)
        )
    except HookFailure as failure:
        outcome = failure
    except MalformedDecisionError as exc:
        outcome = HookFailure("malformed", f"malformed decision: {exc}")
    if isinstance(outcome, Modify) and reorders(fire.event):
        try:
            outcome = screen(payload, outcome)
        except UnsafeReorderError as exc:  # docs/adr/0071: never add or change a hit
            outcome = HookFailure("refused", f"unsafe reorder: {exc}")
    return outcome, (time.perf_counter() - started) * 1000


def _record(
    name: str, outcome: Decision | HookFailure, effect: Any, latency_ms: float
) -> HookRecord:
    if isinstance(outcome, HookFailure):
        return HookRecord(name=name, answer=None, effect=effect, latency_ms=latency_ms,
                          failure=outcome.cause, detail=outcome.detail)
    return HookRecord(name=name, answer=outcome.kind, effect=effect, latency_ms=latency_ms)


def _count(metrics: HookMetrics, event: str, record: HookRecord) -> None:
    metrics.observe(hook=record.name, event=event, effect=record.effect,
                    latency_s=record.latency_ms / 1000, failure=record.failure)
