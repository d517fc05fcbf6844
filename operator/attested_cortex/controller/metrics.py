"""The operator's Prometheus metrics, served by ``cortexctl operator`` on ``/metrics``.

``cortex_operator_api_writes_total`` counts every write request the operator sends (by
verb and kind): the direct measure of "an idle operator writes nothing".
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

METRICS: Final = CollectorRegistry()
API_WRITES: Final = Counter("cortex_operator_api_writes", "Write requests sent to the API server",
                            ["verb", "kind"], registry=METRICS)
RECONCILES: Final = Counter("cortex_operator_reconciles", "Reconcile passes, by kind and outcome",
                            ["kind", "outcome"], registry=METRICS)
READY: Final = Gauge("cortex_operator_ready", "1 once the operator has started", registry=METRICS)
