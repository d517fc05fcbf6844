"""Folding hook answers into one chain result: pure, no I/O.

The firing loop (:mod:`.firing`) calls :func:`fold` after each hook, in priority order,
and :func:`finish` at the end; the service layer reads the :class:`ChainResult`.

Rules: the first Deny stops the chain. Modify deltas (JSON merge patches, :mod:`.patching`)
apply in order and later hooks see the modified payload; on a post- event a Modify is
ignored with a warning (except a reorder of ``post_recall``'s results, screened by
:mod:`.reordering`), and so is an AskUser. The first AskUser is remembered and the chain
goes on (a later Deny still wins). A failed hook counts as Allow plus a warning under
``fail_mode: open`` and as a Deny (code ``hook_failed``) under ``closed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from attested_cortex.hooks.decisions import Allow, AskUser, Decision, DecisionKind, Deny, Modify
from attested_cortex.hooks.events import is_pre
from attested_cortex.hooks.patching import merge_patch
from attested_cortex.hooks.reordering import note, reorders
from attested_cortex.hooks.settings import FailMode
from attested_cortex.hooks.wire import FailureCause, HookFailure

ChainDecision = Literal["allow", "deny", "ask_user"]


@dataclass(frozen=True)
class HookRecord:
    """What one hook did, for the audit log: its answer, its effect, latency, failure."""

    name: str
    answer: DecisionKind | None
    effect: DecisionKind
    latency_ms: float
    failure: FailureCause | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ChainResult:
    """The chain's verdict; ``payload`` carries every applied Modify delta."""

    decision: ChainDecision
    payload: Mapping[str, Any]
    reason: str | None = None
    code: str | None = None
    decided_by: str | None = None
    prompt: str | None = None
    options: tuple[str, ...] = ()
    default: str | None = None
    warnings: tuple[str, ...] = ()
    records: tuple[HookRecord, ...] = ()

    @property
    def modified(self) -> bool:
        """Whether any Modify delta was applied."""
        return any(record.effect == "modify" for record in self.records)

    @property
    def reorder_note(self) -> str | None:
        """What the hooks did to a recall's order (:func:`.reordering.note`)."""
        return note(self.records)


@dataclass(frozen=True)
class ChainState:
    """The chain so far."""

    event: str
    payload: Mapping[str, Any]
    deny: tuple[str, Deny] | None = None
    ask: tuple[str, AskUser] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def stopped(self) -> bool:
        """A Deny ends the chain."""
        return self.deny is not None


def fold(
    state: ChainState, *, hook: str, outcome: Decision | HookFailure, fail_mode: FailMode
) -> tuple[ChainState, DecisionKind]:
    """Apply one hook's outcome; returns the new state and the effective decision kind."""
    if isinstance(outcome, HookFailure):
        return _fold_failure(state, hook=hook, failure=outcome, fail_mode=fail_mode)
    if isinstance(outcome, Deny):
        return dataclasses.replace(state, deny=(hook, outcome)), "deny"
    if isinstance(outcome, Allow):
        return state, "allow"
    if not is_pre(state.event) and not (isinstance(outcome, Modify) and reorders(state.event)):
        return _warn(state, f"hook {hook!r}: {outcome.kind} ignored on post event"), "allow"
    if isinstance(outcome, Modify):
        return dataclasses.replace(state, payload=merge_patch(state.payload, outcome.delta)), (
            "modify"
        )
    if state.ask is None:
        state = dataclasses.replace(state, ask=(hook, outcome))
    return state, "ask_user"


def _fold_failure(
    state: ChainState, *, hook: str, failure: HookFailure, fail_mode: FailMode
) -> tuple[ChainState, DecisionKind]:
    message = f"hook {hook!r} failed ({failure.cause}): {failure.detail}"
    if fail_mode == "open":
        return _warn(state, message + "; fail_mode open: allowed"), "allow"
    deny = Deny(reason=message + "; fail_mode closed: denied", code="hook_failed")
    return dataclasses.replace(state, deny=(hook, deny)), "deny"


def _warn(state: ChainState, message: str) -> ChainState:
    return dataclasses.replace(state, warnings=(*state.warnings, message))


def finish(state: ChainState, records: tuple[HookRecord, ...]) -> ChainResult:
    """The verdict: Deny beats AskUser beats Allow."""
    common: dict[str, Any] = {
        "payload": state.payload, "warnings": state.warnings, "records": records
    }
    if state.deny is not None:
        hook, deny = state.deny
        return ChainResult(
            decision="deny", reason=deny.reason, code=deny.code, decided_by=hook, **common
        )
    if state.ask is not None:
        hook, ask = state.ask
        return ChainResult(
            decision="ask_user", prompt=ask.prompt, options=ask.options, default=ask.default,
            decided_by=hook, reason=ask.prompt, code="hook_ask_user", **common,
        )
    return ChainResult(decision="allow", **common)
