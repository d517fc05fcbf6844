"""AuditWitnessed and status.audit.witnesses (issue 40, ADR 0102): an operator-run witness
gets its key Secret (made once), ServiceAccount (audit.read alone on the cortex), state
claim and Deployment; what it serves on ``GET /report`` (the witness's own report server,
over real loopback HTTP) becomes its status item; a refusal is a False condition with a
Warning event of its own reason, the recovery a Normal one; an idle pass writes nothing;
a witness removed from the spec takes its Deployment and condition with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from attested_cortex.builders import names as n
from attested_cortex.builders import witnesses as w
from attested_cortex.cli.witness_reports import Cosigned, Outcome, ReportServer
from tests.controller_fast.conftest import (
    Operated,
    cortex,
    database_runs,
    job_finished,
    server_rolled,
)

KIND = "MemoryCortex"
BASE = "mem-witness-w1"
REFUSAL = ("refused (truncated): history shortened: the log's checkpoint of size 15 (root "
           "AAA=) is smaller than the cosigned checkpoint of size 25 (root BBB=)")


@pytest.fixture
def report() -> Iterator[ReportServer]:
    server = ReportServer("127.0.0.1:0")
    yield server
    server.server.shutdown()
    server.server.server_close()


def witnessed(**audit: object) -> dict[str, object]:
    return cortex("mem", audit={"witnesses": [{"name": "w1", "run": {"intervalSeconds": 7}}],
                                **audit})


async def ready(op: Operated, body: dict[str, object]) -> None:
    op.apply(body)
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")


def pod_runs(op: Operated, port: int) -> None:
    """The Deployment's pod runs on 127.0.0.1 with the report port the test's server has."""
    template = (op.get("Deployment", BASE, "apps/v1") or {})["spec"]["template"]
    spec = template["spec"]
    spec["containers"][0]["ports"] = [{"name": "report", "containerPort": port}]
    op.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{BASE}-x", "labels": template["metadata"]["labels"]}, "spec": spec})
    op.set_status("v1", "Pod", f"{BASE}-x", {"phase": "Running", "podIP": "127.0.0.1"})


async def test_the_witness_runs_and_its_cosignatures_and_refusals_reach_status(
        op: Operated, report: ReportServer) -> None:
    await ready(op, witnessed())
    key = op.get("Secret", f"{BASE}-key", "v1") or {}
    assert w.KEY_FILE in (key.get("data") or key.get("stringData") or {})
    assert op.get("ServiceAccount", BASE, "v1") is not None
    claim = op.get("PersistentVolumeClaim", f"{BASE}-state", "v1") or {}
    assert claim["spec"]["resources"]["requests"]["storage"] == "16Mi"
    args = (op.get("Deployment", BASE, "apps/v1") or {})["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert args[args.index("--every") + 1] == "7"
    config = yaml.safe_load((op.get("ConfigMap", n.config_name("mem"), "v1") or {})["data"][
        "config.yaml"])
    assert {"service_account": f"ns/{BASE}", "agent_id": f"k8s:ns/{BASE}",
            "scopes": ["audit.read"]} in config["agents"]
    assert "witnesses" not in config["audit"]  # it pulls: the server offers it nothing
    # No pod yet: pending, a Normal event, the cortex Ready all the same.
    assert op.reasons(KIND, "mem")["AuditWitnessed"] == ("Unknown", "WitnessPending")

    pod_runs(op, report.port)
    report.publish(Outcome(0, Cosigned(25, "BBB=", "2026-12-05T01:00:00Z"), None))
    assert await op.reconcile(KIND, "mem") == 15.0  # the reports are polled, not watched
    assert op.status(KIND, "mem")["audit"] == {"witnesses": [{
        "name": "w1", "cosignedSize": 25, "cosignedAt": "2026-12-05T01:00:00Z"}]}
    assert op.reasons(KIND, "mem")["AuditWitnessed"] == ("True", "Witnessed")
    condition = op.condition(KIND, "mem", "AuditWitnessed")
    assert condition["observedGeneration"] == 1 and "size 25" in condition["message"]

    writes = op.writes()
    await op.reconcile(KIND, "mem")  # idle: the same report
    assert [c for c in op.writer.calls[writes:] if c[0] != "apply" or c[2]] == []
    assert op.status(KIND, "mem")["audit"]["witnesses"][
        0]["cosignedSize"] == 25

    report.publish(Outcome(1, Cosigned(25, "BBB=", "2026-12-05T01:00:00Z"), REFUSAL))
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["AuditWitnessed"] == ("False", "WitnessRefused")
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")
    item = op.status(KIND, "mem")["audit"]["witnesses"][0]
    assert item["cosignedSize"] == 25 and item["lastError"] == REFUSAL
    assert "size 15" in op.condition(KIND, "mem", "AuditWitnessed")["message"]
    assert op.events(KIND, "mem")[-1] == ("Warning", "WitnessRefused")

    report.publish(Outcome(0, Cosigned(30, "CCC=", "2026-12-05T01:05:00Z"), None))
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["AuditWitnessed"] == ("True", "Witnessed")
    assert op.events(KIND, "mem")[-1] == ("Normal", "Witnessed")
    assert not any(t == "Warning" and r != "WitnessRefused" for t, r in op.events(KIND, "mem"))


async def test_an_unread_report_keeps_the_status_and_the_key_is_made_once(
        op: Operated, report: ReportServer) -> None:
    await ready(op, witnessed())
    pod_runs(op, report.port)
    report.publish(Outcome(0, Cosigned(9, "AAA=", "2026-12-05T01:00:00Z"), None))
    await op.reconcile(KIND, "mem")
    key = op.get("Secret", f"{BASE}-key", "v1")
    report.server.shutdown()  # the pod restarting: nothing answers
    report.server.server_close()
    await op.reconcile(KIND, "mem")
    assert op.status(KIND, "mem")["audit"]["witnesses"][0]["cosignedSize"] == 9
    assert op.get("Secret", f"{BASE}-key", "v1") == key


async def test_a_witness_removed_from_the_spec_takes_its_pod_and_condition(
        op: Operated) -> None:
    await ready(op, witnessed())
    assert op.get("Deployment", BASE, "apps/v1") is not None
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    assert op.get("Deployment", BASE, "apps/v1") is None
    assert op.get("ServiceAccount", BASE, "v1") is None
    assert "AuditWitnessed" not in op.reasons(KIND, "mem")
    assert "audit" not in op.status(KIND, "mem")
    assert op.get("Secret", f"{BASE}-key", "v1") is not None  # named again, it resumes


async def test_tokens_auth_runs_no_witness_and_says_why(op: Operated) -> None:
    body = witnessed()
    body["spec"]["server"] = {"auth": {"mode": "Tokens",  # type: ignore[index]
                                       "tokensSecretRef": {"name": "t", "key": "tokens"}}}
    op.apply(body)
    await op.reconcile(KIND, "mem")
    assert op.get("Deployment", BASE, "apps/v1") is None
    assert op.reasons(KIND, "mem")["AuditWitnessed"] == ("False", "WitnessUnsupported")
