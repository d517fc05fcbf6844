"""``cortex_operator_condition`` and ``cortex_operator_condition_reason`` read from watched
bodies: the backup-failed alert (charts/attested-cortex/files/prometheus-rules.yaml) tells a
failed backup from one not taken yet by the reason series alone."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from attested_cortex.controller.metrics import ConditionCollector
from attested_cortex.controller.runtime import Views


def cortex(name: str, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team"}, "status": {"conditions": [
        {"type": t, "status": s, "reason": r} for t, s, r in conditions]}}


def scrape(bodies: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    collector = ConditionCollector()
    collector.views = Views(by_name={"MemoryCortex": bodies, "Pod": {}})
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_each_condition_exports_its_status_and_its_reason() -> None:
    text = scrape({
        ("team", "failing"): [cortex("failing", ("Ready", "True", "Ready"),
                                     ("BackupHealthy", "False", "BackupFailed"))],
        ("team", "young"): [cortex("young", ("BackupHealthy", "False", "BackupPending"))]})
    assert ('cortex_operator_condition{kind="MemoryCortex",name="failing",namespace="team",'
            'type="BackupHealthy"} 0.0') in text
    assert ('cortex_operator_condition_reason{kind="MemoryCortex",name="failing",'
            'namespace="team",reason="BackupFailed",type="BackupHealthy"} 1.0') in text
    assert ('cortex_operator_condition_reason{kind="MemoryCortex",name="young",'
            'namespace="team",reason="BackupPending",type="BackupHealthy"} 1.0') in text
    assert text.count("cortex_operator_condition_reason{") == 3


def test_both_families_exist_before_any_object() -> None:
    text = scrape({})
    assert "# TYPE cortex_operator_condition gauge" in text
    assert "# TYPE cortex_operator_condition_reason gauge" in text
