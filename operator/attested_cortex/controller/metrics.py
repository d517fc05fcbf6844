"""The operator's Prometheus metrics, served by ``cortexctl operator`` on ``/metrics``.

``cortex_operator_api_writes_total`` counts every write request the operator sends (by
verb and kind): the direct measure of "an idle operator writes nothing".
``cortex_operator_condition`` exposes our objects' conditions for alerting, and
``cortex_operator_condition_reason`` the reason each one holds (so an alert can tell a backup
that failed from one not taken yet: both are ``BackupHealthy`` False).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily

from attested_cortex.crd.kinds import KINDS

KIND_NAMES: Final = frozenset(k.kind for k in KINDS)

METRICS: Final = CollectorRegistry()
API_WRITES: Final = Counter("cortex_operator_api_writes", "Write requests sent to the API server",
                            ["verb", "kind"], registry=METRICS)
RECONCILES: Final = Counter("cortex_operator_reconciles", "Reconcile passes, by kind and outcome",
                            ["kind", "outcome"], registry=METRICS)
READY: Final = Gauge("cortex_operator_ready", "1 once the operator has started", registry=METRICS)


class ConditionCollector:
    """``cortex_operator_condition{kind,namespace,name,type}``: 1 when a condition of one of
    our objects is True, else 0; ``cortex_operator_condition_reason{kind,namespace,name,type,
    reason}``: 1 for the reason the condition holds now (kube-state-metrics' pattern: the
    reason as a label of its own series, not of the status one, so a new reason does not
    break the status series' history). Read at scrape time from the operator's watched
    views (so an object deleted is gone from the next scrape, and a restart reports what the
    API server holds, not what this process wrote). The chart's alerts on a cortex not
    Ready, a database unreachable and a failed backup read them."""

    def __init__(self) -> None:
        self.views: Any = None  # controller.runtime.Views, bound by the registry at start-up

    def collect(self) -> Iterator[GaugeMetricFamily]:
        status = GaugeMetricFamily(
            "cortex_operator_condition", "Conditions of our custom resources (1 True, else 0)",
            labels=["kind", "namespace", "name", "type"])
        reasons = GaugeMetricFamily(
            "cortex_operator_condition_reason",
            "The reason each condition of our custom resources holds (always 1)",
            labels=["kind", "namespace", "name", "type", "reason"])
        for kind, namespace, name, cond in self._conditions():
            labels = [kind, namespace, name, str(cond.get("type"))]
            status.add_metric(labels, 1.0 if cond.get("status") == "True" else 0.0)
            reasons.add_metric([*labels, str(cond.get("reason") or "")], 1.0)
        yield status
        yield reasons

    def _conditions(self) -> Iterator[tuple[str, str, str, Any]]:
        by_name = getattr(self.views, "by_name", None) or {}
        for kind in sorted(k for k in by_name if k in KIND_NAMES):
            for (namespace, name), bodies in list(by_name[kind].items()):
                for body in list(bodies)[:1]:
                    for cond in (body.get("status") or {}).get("conditions") or []:
                        yield kind, namespace, name, cond


CONDITIONS: Final = ConditionCollector()
METRICS.register(CONDITIONS)
