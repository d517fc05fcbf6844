"""Ready and the status fields: what the cortex waits for, one event per step, what it
serves (rules, hooks, identities), pause and resume, a rollout held while changes settle."""

from __future__ import annotations

from attested_cortex.builders import names as n
from tests.controller_fast.conftest import (
    Operated,
    cortex,
    daemon_hook,
    database_runs,
    exec_hook,
    job_finished,
    rule,
    satellite,
    server_rolled,
)

KIND = "MemoryCortex"


async def roll(op: Operated) -> None:
    """Passes until the cortex is Ready, Kubernetes' controllers doing their part."""
    await op.reconcile(KIND, "mem")
    database_runs(op)
    await op.reconcile(KIND, "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile(KIND, "mem")
    server_rolled(op)
    await op.reconcile(KIND, "mem")


async def test_ready_names_what_the_cortex_waits_for_step_by_step(op: Operated) -> None:
    op.apply(cortex("mem"))
    await roll(op)
    assert op.reasons(KIND, "mem")["Ready"] == ("True", "CortexReady")
    assert op.events(KIND, "mem") == [("Normal", "DatabaseStarting"), ("Normal", "Migrating"),
                                      ("Normal", "ServerRollingOut"), ("Normal", "CortexReady")]
    status = op.status(KIND, "mem")
    assert {k: status[k] for k in ("schemaVersion", "kgBackend", "endpoint", "hookCount",
                                   "identities", "ruleSummary")} == {
        "schemaVersion": op.rt.defaults.schema_version, "kgBackend": "cte",
        "endpoint": "http://mem.ns.svc:8080", "hookCount": 0, "identities": 0,
        "ruleSummary": []}
    assert {c["observedGeneration"] for c in status["conditions"]} == {1}


async def test_the_status_lists_the_rules_and_hooks_it_serves(op: Operated) -> None:
    op.apply(cortex("mem"), rule("team", priority=5),
             satellite("HookChain", "safety", "mem", hooks=[exec_hook("redact")]))
    await roll(op)
    status = op.status(KIND, "mem")
    assert status["ruleSummary"] == ["[5] Allow recall on team/** (and children) for * (team)"]
    assert status["hookCount"] == 1
    config = op.get("ConfigMap", "mem-config", "v1") or {}
    assert "team/**" in str(config["data"]) and "redact" in str(config["data"])


async def test_a_paused_cortex_changes_nothing_until_resumed(op: Operated) -> None:
    op.apply(cortex("mem", paused=True))
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem") == {"Paused": ("True", "Paused")}
    assert op.writer.calls == [("apply", KIND, "status"), ("create", "Event", "")]
    op.apply(cortex("mem", paused=False))
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["Paused"] == ("False", "Reconciling")
    assert op.get("StatefulSet", "mem-db", "apps/v1") is not None
    assert op.status(KIND, "mem")["observedGeneration"] == 2


async def test_an_unusable_name_is_reported_and_nothing_is_made(op: Operated) -> None:
    op.apply(cortex("m" * 41))
    await op.reconcile(KIND, "m" * 41)
    ready = op.condition(KIND, "m" * 41, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert ready["message"].startswith("metadata.name: at most 40 characters")
    assert op.cluster.list("apps/v1", "StatefulSet", "ns") == []


async def test_a_rollout_waits_while_satellite_changes_settle(op: Operated) -> None:
    op.apply(cortex("mem"))
    await roll(op)
    served = (op.get("Deployment", n.server_name("mem"), "apps/v1") or {})["metadata"]
    op.apply(satellite("HookChain", "links", "mem", hooks=[daemon_hook("auto-link")]))
    op.rt.settle(KIND, "ns", "mem")  # what the registry does when a satellite changes
    await op.reconcile(KIND, "mem")
    held = (op.get("Deployment", n.server_name("mem"), "apps/v1") or {})["metadata"]
    assert held["generation"] == served["generation"]
    pending = op.condition(KIND, "mem", "ServerReady")
    assert (pending["status"], pending["reason"]) == ("False", "ChangesPending")
    assert "satellite changes are settling" in pending["message"]
