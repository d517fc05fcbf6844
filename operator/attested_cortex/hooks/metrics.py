"""Prometheus metrics of the hook pipeline, registered on a registry the caller passes in.

The pipeline (:mod:`.dispatching`) and the reload watcher (:mod:`.watching`) record here; the
server exposes the registry on ``GET /metrics``. One :class:`HookMetrics` per registry:
a pipeline keeps it across reloads, so metric families are registered exactly once.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Latency buckets in seconds: daemon round trips are sub-millisecond, exec spawns tens of ms.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class HookMetrics:
    """Per-hook fires, decisions, failures (and those let through: failed open), latency;
    daemon restarts; config reloads."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.fires = Counter(
            "cortex_hook_fires", "Hook invocations.", ["hook", "event"], registry=registry
        )
        self.decisions = Counter(
            "cortex_hook_decisions", "Effective hook decisions by kind.",
            ["hook", "event", "decision"], registry=registry,
        )
        self.failures = Counter(
            "cortex_hook_failures", "Hook failures by cause (timeout, crash, malformed, ...).",
            ["hook", "event", "cause"], registry=registry,
        )
        # A failure whose effect is allow is one fail_mode open let through (closed denies):
        # the series the chart's CortexHookFailingOpen alert reads.
        self.failed_open = Counter(
            "cortex_hook_failed_open", "Hook failures let through by fail_mode open.",
            ["hook", "event"], registry=registry,
        )
        self.latency = Histogram(
            "cortex_hook_latency_seconds", "Time from fire to decision, per hook.",
            ["hook", "event"], buckets=_BUCKETS, registry=registry,
        )
        self.restarts = Counter(
            "cortex_hook_daemon_restarts", "Daemon/remote hook restarts or reconnects.",
            ["hook"], registry=registry,
        )
        self.reloads = Counter(
            "cortex_hook_config_reloads", "Hook config reloads by result.",
            ["result"], registry=registry,
        )
        self.config_valid = Gauge(
            "cortex_hook_config_valid", "1 if the last hook config load succeeded, else 0.",
            registry=registry,
        )
        self.config_valid.set(1)
        self._per_hook: dict[tuple[str, str], tuple[Any, Any]] = {}

    def observe(self, *, hook: str, event: str, effect: str, latency_s: float,
                failure: str | None) -> None:
        """Count one hook fire (label children cached: this runs on every fire)."""
        key = (hook, event)
        children = self._per_hook.get(key)
        if children is None:
            children = (self.fires.labels(hook, event), self.latency.labels(hook, event))
            self._per_hook[key] = children
        children[0].inc()
        children[1].observe(latency_s)
        self.decisions.labels(hook, event, effect).inc()
        if failure is not None:
            self.failures.labels(hook, event, failure).inc()
            if effect == "allow":
                self.failed_open.labels(hook, event).inc()
