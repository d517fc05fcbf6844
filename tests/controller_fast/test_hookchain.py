"""HookChain passes: validated with its siblings, its accepted hooks in status, in force only
once a serving pod runs them (looked at again while not), nothing written when idle."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders.sidecars import container_name
from attested_cortex.controller.hookchain import NOT_RUNNING_RETRY_S
from tests.controller_fast.conftest import Operated, cortex, daemon_hook, exec_hook, satellite

KIND = "HookChain"


def chain(name: str, *hooks: dict[str, Any], cortex_name: str = "mem") -> dict[str, Any]:
    return satellite(KIND, name, cortex_name, hooks=list(hooks))


def serve(op: Operated, *containers: str, available: int = 1) -> None:
    """The cortex's server Deployment, its template carrying ``containers``, as running."""
    op.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mem-server"},
              "spec": {"replicas": 1, "template": {"spec": {"containers": [
                  {"name": c, "image": "x"} for c in ("server", *containers)]}}}})
    generation = (op.get("Deployment", "mem-server", "apps/v1") or {})["metadata"]["generation"]
    op.set_status("apps/v1", "Deployment", "mem-server", {
        "observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
        "readyReplicas": available, "availableReplicas": available})


async def test_a_valid_chain_lists_its_accepted_hooks(op: Operated) -> None:
    op.apply(chain("safety", exec_hook("redact"), exec_hook("audit")))
    assert await op.reconcile(KIND, "safety") is None  # nothing to run in: no retry
    status = op.status(KIND, "safety")
    assert [h["name"] for h in status["acceptedHooks"]] == ["redact", "audit"]
    assert status["hookCount"] == 2
    assert op.reasons(KIND, "safety") == {"Accepted": ("True", "Valid"),
                                          "CortexFound": ("False", "CortexNotFound"),
                                          "Ready": ("False", "CortexNotFound"),
                                          # kstatus reads it InProgress (ADR 0046)
                                          "Reconciling": ("True", "CortexNotFound"),
                                          "Stalled": ("False", "CortexNotFound")}
    assert op.condition(KIND, "safety", "Accepted")["message"] == "2 hooks valid"


async def test_a_clashing_chain_is_refused_and_keeps_its_last_accepted_hooks(
        op: Operated) -> None:
    op.apply(chain("b", exec_hook("mine")))
    await op.reconcile(KIND, "b")
    op.apply(chain("a", exec_hook("shared")), chain("b", exec_hook("shared")))
    await op.reconcile(KIND, "a")
    await op.reconcile(KIND, "b")
    assert op.reasons(KIND, "a")["Accepted"] == ("True", "Valid")
    refused = op.condition(KIND, "b", "Accepted")
    assert (refused["status"], refused["reason"]) == ("False", "InvalidHook")
    assert refused["message"] == ("hook 'shared': the name is already used by HookChain a "
                                  "of the same cortex")
    assert [h["name"] for h in op.status(KIND, "b")["acceptedHooks"]] == ["mine"]
    assert op.events(KIND, "b")[-1] == ("Warning", "InvalidHook")


async def test_hooks_are_not_in_force_until_a_serving_pod_runs_them(op: Operated) -> None:
    op.apply(cortex("mem"), chain("safety", exec_hook("redact")))
    assert await op.reconcile(KIND, "safety") == NOT_RUNNING_RETRY_S
    assert op.reasons(KIND, "safety")["InForce"] == ("False", "NotRunning")
    assert op.condition(KIND, "safety", "InForce")["message"] == "the cortex has no server yet"

    serve(op, available=0)
    assert await op.reconcile(KIND, "safety") == NOT_RUNNING_RETRY_S
    assert op.condition(KIND, "safety", "InForce")["message"] == "no server pod is available"

    serve(op)
    assert await op.reconcile(KIND, "safety") is None
    assert op.reasons(KIND, "safety")["InForce"] == ("True", "Running")
    assert op.reasons(KIND, "safety")["Ready"] == ("True", "HooksInForce")
    assert op.events(KIND, "safety")[-1] == ("Normal", "HooksInForce")


async def test_a_daemon_hook_is_in_force_only_in_a_template_that_carries_it(
        op: Operated) -> None:
    op.apply(cortex("mem"), chain("links", daemon_hook("auto-link")))
    serve(op)
    await op.reconcile(KIND, "links")
    assert op.condition(KIND, "links", "InForce")["message"] == (
        "the server template does not carry hook auto-link yet")
    serve(op, container_name("auto-link"))
    await op.reconcile(KIND, "links")
    assert op.reasons(KIND, "links")["Ready"] == ("True", "HooksInForce")


async def test_an_idle_pass_writes_nothing(op: Operated) -> None:
    op.apply(cortex("mem"), chain("safety", exec_hook("redact")))
    serve(op)
    await op.reconcile(KIND, "safety")
    writes, events = op.writes(), op.events(KIND, "safety")
    await op.reconcile(KIND, "safety")
    assert op.writes() == writes and op.events(KIND, "safety") == events


async def test_an_unparsable_chain_says_which_field(op: Operated) -> None:
    op.apply(chain("bad", {"name": "x", "events": ["pre_store"], "mode": "Sometimes"}))
    await op.reconcile(KIND, "bad")
    assert op.reasons(KIND, "bad") == {"Accepted": ("False", "InvalidSpec"),
                                       "Ready": ("False", "InvalidSpec"),
                                       # kstatus reads it Failed (ADR 0046)
                                       "Reconciling": ("False", "InvalidSpec"),
                                       "Stalled": ("True", "InvalidSpec")}
    assert "spec.hooks.0" in op.condition(KIND, "bad", "Accepted")["message"]
