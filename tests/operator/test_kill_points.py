"""An operator killed with SIGKILL at random points of its reconciliation converges, once
it runs again, to the same objects and the same keys (ADR 0002: every step is safe to
repeat and to interrupt)."""

from __future__ import annotations

import json
import random
import time

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, cortex, satellite

pytestmark = [pytest.mark.kube, pytest.mark.slow]

KILLS = 20
HOOKS = [{"name": "audit", "events": ["post_store"], "mode": "Daemon",
          "sidecar": {"image": "example.invalid/audit:1"}},
         {"name": "redact", "events": ["pre_store"], "command": ["redact"]}]


def _secrets(operated: Operated) -> dict[str, dict[str, str]]:
    out = operated.kubectl("get", "secrets", "-l",
                           "app.kubernetes.io/managed-by=attested-cortex-operator",
                           "-o", "json").stdout
    return {s["metadata"]["name"]: s["data"] for s in json.loads(out)["items"]}


def _versions(operated: Operated) -> dict[str, str]:
    out = operated.kubectl("get", "mcx,aid,hc,prule,deploy,sts,svc,cm,secret,job,netpol,sa,pdb",
                           "-o", "json").stdout
    return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in json.loads(out)["items"]}


def test_sigkill_at_random_points_converges_to_the_same_objects_and_keys(
        operated: Operated) -> None:
    rng = random.Random(20261130)
    resources = [cortex("crashy", server={"replicas": 2}),
                 satellite("AgentIdentity", "crash-signer", "crashy"),
                 satellite("AgentIdentity", "crash-holder", "crashy", keyCustody="Agent"),
                 satellite("HookChain", "crash-hooks", "crashy", hooks=HOOKS),
                 satellite("PermissionRule", "crash-rule", "crashy", namespace="a/**",
                           agents=["*"], operations=["*"], decision="Deny")]
    first_seen: dict[str, dict[str, str]] = {}
    for kill in range(KILLS):
        run = operated.start()
        if kill == 0:
            operated.apply(*resources)
        if kill == KILLS // 2:  # a spec change half way: a new generation mid-crash
            operated.kubectl("patch", "hc/crash-hooks", "--type=merge", "-p", json.dumps(
                {"spec": {"hooks": [HOOKS[0]]}}))
        time.sleep(rng.uniform(0.0, 1.5))  # a random kill point, not synchronisation
        run.process.kill()
        run.process.wait(timeout=30)
        for name, data in _secrets(operated).items():
            assert first_seen.setdefault(name, data) == data, f"{name} changed after kill {kill}"
    final = operated.start()
    operated.kubectl("wait", "--for=condition=Ready", "mcx/crashy", "aid/crash-signer",
                     "aid/crash-holder", "hc/crash-hooks", "prule/crash-rule", "--timeout=180s")
    assert _secrets(operated) == {**first_seen, **_secrets(operated)}
    assert {"crashy-db-credentials", "crash-signer-agent-key",
            "crash-holder-agent-key"} <= set(first_seen)
    assert all(_secrets(operated)[name] == data for name, data in first_seen.items())
    wait_until(lambda: _quiet(final), what="writes to settle", seconds=60, interval_s=0.2)
    settled = _versions(operated)
    final.process.kill()
    final.process.wait(timeout=30)
    fresh = operated.start()  # a clean start over the converged objects changes nothing
    wait_until(lambda: _quiet(fresh), what="the fresh operator to settle", seconds=60,
               interval_s=0.2)
    assert _versions(operated) == settled
    deploy = operated.get("deployment", "crashy-server")
    containers = [c["name"] for c in deploy["spec"]["template"]["spec"]["containers"]]
    assert containers == ["server", "hook-audit"]


def _quiet(run: object) -> bool:
    writes = run.writes()  # type: ignore[attr-defined]
    time.sleep(3)  # two samples of a counter, 3 s apart
    return bool(writes == run.writes() and writes > 0)  # type: ignore[attr-defined]
