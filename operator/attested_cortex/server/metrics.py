"""Prometheus metrics of the HTTP layer, on a registry owned by the application.

A registry per application (not the process-global default) keeps tests isolated and lets
other components (hooks) register onto the same one for ``GET /metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram


@dataclass(frozen=True)
class HttpMetrics:
    """Request counters and latency by route and status."""

    registry: CollectorRegistry
    requests: Counter
    latency: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> HttpMetrics:
        """Register the HTTP metrics on ``registry`` (a new one by default)."""
        reg = registry or CollectorRegistry()
        return cls(
            registry=reg,
            requests=Counter(
                "cortex_http_requests", "HTTP requests served", ["route", "method", "status"],
                registry=reg,
            ),
            latency=Histogram(
                "cortex_http_request_seconds", "HTTP request latency", ["route", "method"],
                registry=reg,
                buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            ),
        )
