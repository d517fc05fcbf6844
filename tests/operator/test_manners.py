"""Operator manners: observedGeneration after every change, paused means paused, an idle
operator writes nothing, and deleting a namespace never waits for the operator."""

from __future__ import annotations

import json
import time

import pytest
from hack.support.kube import Kube
from hack.support.waiting import wait_until

from tests.operator.conftest import (
    Operated,
    OperatorProcess,
    cortex,
    satellite,
    start_operator,
)

pytestmark = pytest.mark.kube


def test_observed_generation_follows_every_spec_change(operated: Operated,
                                                       operator: OperatorProcess) -> None:
    operated.apply(cortex("gen"))
    for replicas in (2, 3, 1):
        operated.kubectl("patch", "mcx/gen", "--type=merge", "-p",
                         json.dumps({"spec": {"server": {"replicas": replicas}}}))
        generation = operated.get("MemoryCortex", "gen")["metadata"]["generation"]

        def caught_up(generation: int = generation) -> bool:
            status = operated.get("MemoryCortex", "gen").get("status") or {}
            return status.get("observedGeneration") == generation and all(
                c["observedGeneration"] == generation for c in status["conditions"])

        wait_until(caught_up, what=f"observedGeneration {generation}", seconds=60, interval_s=0.2)


def test_paused_cortex_is_left_alone(operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("still"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/still", "--timeout=120s")
    before = operated.get("deployment", "still-server")
    operated.kubectl("patch", "mcx/still", "--type=merge", "-p",
                     json.dumps({"spec": {"paused": True, "server": {"replicas": 3}}}))
    operated.wait_condition("MemoryCortex", "still", "Paused")
    after = operated.get("deployment", "still-server")
    assert after["spec"]["replicas"] == before["spec"]["replicas"] == 1
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    operated.kubectl("patch", "mcx/still", "--type=merge", "-p",
                     json.dumps({"spec": {"paused": False}}))
    wait_until(lambda: operated.get("deployment", "still-server")["spec"][
        "replicas"] == 3, what="unpaused rollout", seconds=60, interval_s=0.2)
    operated.wait_condition("MemoryCortex", "still", "Paused", "False")


def test_invalid_spec_is_reported_not_retried_forever(operated: Operated,
                                                      operator: OperatorProcess) -> None:
    long_name = "n" * 41
    operated.apply(cortex(long_name))
    cond = operated.wait_condition("MemoryCortex", long_name, "Ready", "False",
                                   reason="InvalidSpec")
    assert "40 characters" in cond["message"]
    assert operated.get("statefulset", f"{long_name}-db") is None


def _versions(operated: Operated) -> dict[str, str]:
    out = operated.kubectl("get", "mcx,aid,hc,prule,deploy,sts,svc,cm,secret,job,netpol,sa",
                           "-o", "json").stdout
    return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in json.loads(out)["items"]}


def test_idle_operator_writes_nothing(operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("idle"), satellite("AgentIdentity", "idler", "idle"),
                   satellite("PermissionRule", "idle-rule", "idle", namespace="a",
                             agents=["*"], operations=["*"], decision="Allow"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/idle", "aid/idler",
                     "prule/idle-rule", "--timeout=120s")
    settled = wait_until(lambda: _settled(operator), what="writes to settle", seconds=60,
                         interval_s=0.2)
    versions = _versions(operated)
    window = time.monotonic() + 10
    while time.monotonic() < window:  # a measurement window: nothing may happen in it
        time.sleep(1)
    assert operator.writes() == settled
    assert _versions(operated) == versions


def _settled(operator: OperatorProcess) -> float | None:
    first = operator.writes()
    time.sleep(2)  # two samples of a counter, 2 s apart
    return first if operator.writes() == first else None


def test_namespace_deletion_never_waits_for_the_operator(kube: Kube, operated: Operated) -> None:
    namespace = f"{operated.namespace}-gone"
    kube.kubectl("create", "namespace", namespace)
    run = start_operator(namespace, kube.kubeconfig, operated.workdir / "gone.log",
                         tokenreview_role=f"{operated.release}-attested-cortex-tokenreviewer")
    try:
        for body in (cortex("orphan"), satellite("AgentIdentity", "orphan-agent", "orphan")):
            kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body))
        kube.kubectl("wait", "-n", namespace, "--for=condition=Ready", "mcx/orphan",
                     "aid/orphan-agent", "--timeout=120s")
        binding = f"attested-cortex:{namespace}:orphan"
        assert kube.kubectl("get", "clusterrolebinding", binding, check=False).returncode == 0
    finally:
        run.process.kill()  # the operator is gone, as after a crash
        run.process.wait(timeout=30)
    kube.kubectl("delete", "namespace", namespace, "--timeout=90s")
    gone = kube.kubectl("get", "namespace", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    wait_until(lambda: kube.kubectl(
        "get", "clusterrolebinding", binding, check=False).returncode != 0,
               what="the TokenReview binding collected with its namespace", seconds=60,
               interval_s=0.2)
