"""The shape of the pipeline's live self-description, and how one hook is described.

:meth:`attested_cortex.hooks.dispatching.HookPipeline.describe` returns a
:class:`RawHooksDescription`; the server puts it under ``hooks`` in ``/v1/capabilities``
and ``cortexctl doctor --hooks`` renders it (:mod:`.reporting`). Wire JSON, so TypedDicts.
"""

from __future__ import annotations

from typing import TypedDict

from attested_cortex.hooks.firing import BoundHook
from attested_cortex.hooks.wire import TransportState


class RawHookState(TransportState):
    """One hook as listed by describe()."""

    name: str
    mode: str
    priority: int
    timeout_ms: int
    fail_mode: str
    namespaces: list[str]


class RawConfigState(TypedDict):
    """Which configuration is live and whether the last reload worked."""

    path: str | None
    generation: int
    loaded_at: str
    valid: bool
    last_error: str | None
    in_flight: int


class RawHooksDescription(TypedDict):
    """``hooks`` in ``/v1/capabilities``."""

    config: RawConfigState
    by_event: dict[str, list[RawHookState]]


def hook_state(hook: BoundHook) -> RawHookState:
    """One hook's configuration and live transport state."""
    spec, live = hook.spec, hook.transport.state()
    return {
        "name": spec.name, "mode": spec.mode, "priority": spec.priority,
        "timeout_ms": spec.timeout_ms, "fail_mode": spec.fail_mode,
        "namespaces": list(spec.namespaces), "state": live["state"],
        "restarts": live["restarts"], "pid": live["pid"], "last_error": live["last_error"],
    }
