"""The chart's Prometheus rules and Grafana dashboard: promtool accepts the rules and their
unit tests pass, the Prometheus Operator's objects render only where their CRDs are served,
and every series a rule or a panel reads exists under that exact name on a real server's and
a real operator's ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from hack.support.kube import Kube
from hack.support.served import CORTEXCTL, free_port, wait_until_up
from prometheus_client.parser import text_string_to_metric_families

from tests.chart.conftest import render
from tests.gitops.conftest import DASHBOARD, ROOT, RULES
from tests.support.cortex import CortexClient

#: helm, kstatus and promtool are binaries built by `make deps`: not in `make test-fast`.
pytestmark = pytest.mark.tools

SERIES = re.compile(r"\bcortex_[a-z0-9_]+\b")
MONITORING = "monitoring.coreos.com/v1"


def expressions() -> list[str]:
    """Every PromQL expression of the rules file and of the dashboard's panels."""
    rules = yaml.safe_load(RULES.read_text())
    found = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    found += [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    found += [var["query"]["query"] for var in dashboard["templating"]["list"]
              if isinstance(var.get("query"), dict)]
    return found


def exposed(text: str) -> set[str]:
    """The sample names a scrape of ``text`` can carry (a family with no sample yet counts:
    its children appear with its first labels)."""
    names: set[str] = set()
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",), "summary": ("_sum", "_count", "")}
    for family in text_string_to_metric_families(text):
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def test_promtool_checks_and_unit_tests_the_rules(promtool: Path) -> None:
    checked = subprocess.run([str(promtool), "check", "rules", str(RULES)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 9 rules found" in checked.stdout
    tested = subprocess.run(
        [str(promtool), "test", "rules", str(ROOT / "tests/chart/promtool/rules_test.yaml")],
        capture_output=True, text=True, timeout=60, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_monitoring_objects_render_only_where_their_crds_are_served() -> None:
    every = ("metrics.podMonitor.enabled=true", "metrics.serviceMonitor.enabled=true",
             "metrics.servers.podMonitor.enabled=true", "metrics.prometheusRule.enabled=true")
    assert not [o for o in render(*every) if o["apiVersion"] == MONITORING]
    served = [f"{MONITORING}/{kind}" for kind in ("PodMonitor", "ServiceMonitor",
                                                  "PrometheusRule")]
    objects = render(*every, api_versions=served)
    kinds = sorted(o["kind"] for o in objects if o["apiVersion"] == MONITORING)
    assert kinds == ["PodMonitor", "PodMonitor", "PrometheusRule", "ServiceMonitor"]
    rule = next(o for o in objects if o["kind"] == "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    servers = next(o for o in objects if o["metadata"]["name"].endswith("-servers"))
    assert servers["spec"]["namespaceSelector"] == {"matchNames": ["cortex-system"]}
    assert servers["spec"]["podMetricsEndpoints"][0]["port"] == "http"
    board = next(o for o in render("metrics.dashboard.enabled=true") if o["kind"] == "ConfigMap"
                 and o["metadata"]["name"].endswith("-dashboard"))
    assert json.loads(board["data"]["attested-cortex.json"]) == json.loads(DASHBOARD.read_text())
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"


def operator_metrics(kube: Kube, namespace: str) -> set[str]:
    """What a real ``cortexctl operator`` exposes on ``/metrics`` once ready."""
    health, metrics = free_port(), free_port()
    process = subprocess.Popen(
        [*CORTEXCTL, "operator", "--namespace", namespace,
         "--health-listen", f"127.0.0.1:{health}", "--metrics-listen", f"127.0.0.1:{metrics}"],
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(f"http://127.0.0.1:{health}/readyz", process, seconds=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=15) as reply:
            return exposed(reply.read().decode())
    finally:
        process.terminate()
        process.wait(timeout=60)


async def test_every_series_a_rule_or_panel_reads_is_exposed(
        cortex: CortexClient, kube: Kube, kube_namespace: str) -> None:
    wanted = {name for expr in expressions() for name in SERIES.findall(expr)}
    assert len(wanted) >= 15
    server = exposed((await cortex.call("GET", "/metrics")).text)
    operator = await asyncio.to_thread(operator_metrics, kube, kube_namespace)
    missing = wanted - server - operator
    assert not missing, f"read by a rule or panel, exposed by neither: {sorted(missing)}"
