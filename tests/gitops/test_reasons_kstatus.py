"""kstatus and our Argo CD health check read each class of condition reason as intended
(builders/reasons.py): a Ready reason Current, a reconciling one InProgress, a stalled one
Failed. The statuses are the ones the operator writes (controller/statuses.py's merge of
Ready with its derived Reconciling and Stalled), read by the real tools; every reason of the
table, one kstatus and one lua5.4 run each (about 3 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attested_cortex.builders.conditions import Observation, merge, ready
from attested_cortex.builders.conditions import kstatus as derived
from attested_cortex.builders.reasons import MOVING, REASONS, Health
from attested_cortex.crd import GROUP, VERSION
from tests.gitops.test_health import read_as

#: kstatus and lua5.4 are built and installed by `make deps`: not in `make test-fast`.
pytestmark = pytest.mark.tools

READ_AS = {Health.READY: "Current", Health.RECONCILING: "InProgress", Health.STALLED: "Failed"}


def cortex_with_ready(reason: str) -> dict[str, Any]:
    """A MemoryCortex whose Ready carries ``reason`` (True for a Ready reason, else False)."""
    ok = REASONS[reason].health is Health.READY
    part = Observation.of("ServerReady", ok, reason, "as asked" if ok else "not yet")
    summary = ready([part], ready_reason=reason)
    now = "2026-01-01T00:00:00Z"
    conditions = merge(None, [part, summary, *derived(summary, MOVING)], generation=3, now=now)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryCortex",
            "metadata": {"name": "reasons", "namespace": "default", "generation": 3},
            "status": {"observedGeneration": 3, "conditions": conditions}}


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_each_reason_reads_as_its_class(reason: str, kstatus: Path, lua: str) -> None:
    read_as(kstatus, lua, cortex_with_ready(reason), READ_AS[REASONS[reason].health])
